"""The chunk store: large files as content-defined chunks in packs (docs/chunk-store.md).

``files`` takes a file's bytes as they stream (hash, cut) and ``writer`` places
its chunks (dedup lookups, ``claims``, appending through ``packing``; small
files whole through ``wholeblobs``); ``index`` writes the files' rows in the
push's transaction; ``reader`` reads any byte range of a stored file, whole
blob or chunked. May import blobstore/, carton/, chunking, db/ and services'
context and leases.
"""
