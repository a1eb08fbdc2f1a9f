"""The chunk store: large files as content-defined chunks in packs (docs/chunk-store.md).

``writer`` takes a file's bytes as they stream (hash, cut, dedup, append to the
push's pack); ``index`` writes the files' rows in the push's transaction;
``reader`` reads any byte range of a stored file, whole blob or chunked. May
import blobstore/, carton/, db/ and services' context and leases.
"""
