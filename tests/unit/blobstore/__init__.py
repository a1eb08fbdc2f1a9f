"""The filesystem and memory blob stores against ``tests/blobstore_conformance.py``, and
``open_blobstore``; may import ``registry.blobstore`` and ``tests.helpers`` only."""
