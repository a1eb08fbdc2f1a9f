"""The verbs: framework-free, synchronous, one transaction per call, no HTTP.

Each takes a ``RegistryContext`` (``context``: settings, database, blob store,
``observers``, ``caches``) and raises the domain errors of ``registry.errors`` (or lets
the blob store's and the carton format's own errors through; one table at the HTTP
edge maps them all). Where things are:

- push: ``ingest/`` (one pass over the zip as it streams: bytes first, checks, rows
  second); ``chunkstore/`` (files as content-defined chunks in packs: writer, reader,
  rows); ``blobs`` (single-blob uploads, dedup queries); ``linkfetch`` (LINKS,
  allow-listed and pinned); ``leases`` (pushes vs GC); ``uploads`` (spooled bodies)
- reads: ``cartons``, ``models``, ``listing`` (the model list and its index columns),
  ``references`` (name, name:version, name@tag, hash), ``stats``, ``webviews`` (pages),
  ``chunk_savings`` (what versions share below the file), ``storage_accounting``
  (per-model shared and exclusive bytes), both for the pages,
  ``lookups`` (reads that open their own session, for callers that hold none)
- writes: ``tags``, ``deletes``; pull: ``export`` (rebuilt slim/full cartons),
  ``blob_serving`` (a blob download: presigned redirect, identity or compressed bytes)
- maintenance: ``gc``, ``fsck``, ``health`` (readiness); ``auth`` (tokens);
  ``triton/`` (the v2 protocol, its own package)
- shared: ``names`` (name, version and digest rules), ``rendering`` (JSON values),
  ``caches`` and ``observers`` (what the context holds between calls)

May import ``registry.carton``, ``registry.chunking``, ``registry.blobstore``,
``registry.db``, ``registry.settings`` and ``registry.errors`` (``triton/`` also
``registry.triton`` and the package's ``__version__``); never ``registry.http``,
``registry.app`` or the CLI.
``tests/unit/test_layering.py`` holds every package to its sentence.
"""
