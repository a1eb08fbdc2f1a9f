"""Carton Registry: a content-addressed registry and dedup store for .carton model packages.

Dependencies point down: ``http/`` (and ``app``, which assembles it) and ``cli/`` ->
``services/`` -> ``carton/``, ``triton/``, ``blobstore/``, ``db/``; ``client/`` stands
beside them on ``carton/`` and ``chunking`` (FastCDC cuts and BLAKE3 names, pure:
imports nothing of ours) alone. ``settings`` and ``errors`` serve every layer
(``errors`` imports nothing; ``settings`` only the carton format's limits and sizes);
``script`` is the ``carton-registry`` entry point, in front of ``cli/``; ``worker`` is a
server worker process's (the app from the environment ``serve`` prepared), beside
``cli/`` so a worker does not import the command line; ``allocator`` (glibc's malloc
thresholds, stdlib only) serves both.
Each package's docstring says what lives there and what it may import;
``tests/unit/test_layering.py`` holds them to it. This module holds ``__version__`` only.
"""

__version__ = "0.1.0"
