"""Push: a carton's bytes into the store in one pass, then its rows in one transaction.

``push.py`` drives it: ``receive.py`` walks the zip as it streams and writes
every member through the chunk store (nothing is spooled), ``resolve.py``
finds the files a slim carton leaves out (in the store, or through LINKS),
``index.py`` writes the rows once the central directory, CRCs, sizes and
MANIFEST all checked out, and only while the push's lease proves GC took
nothing. ``repush.py`` answers a small zip that re-pushes an indexed carton,
needing no write, from the index with the same checks done as reads. May import
carton/, blobstore/, db/ and the other services.
"""

from registry.services.ingest.push import (
    PushResult,
    check_may_push_into,
    ingest_file,
    ingest_stream,
)

__all__ = ["PushResult", "check_may_push_into", "ingest_file", "ingest_stream"]
