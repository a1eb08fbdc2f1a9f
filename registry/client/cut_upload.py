"""Cut uploads, the client's side (the registry's: ``services.cut_upload``): a Stored file
the registry holds nothing of goes whole, as the records of the chunks FastCDC cuts here,
each a 4-byte big-endian length and its bytes. The registry names and hashes every byte
as for a plain whole upload but does not cut the file again: that was a quarter of the
thread a push is bound by there, and this process has a core and a GIL of its own.

The member is cut where it lies in the mapped zip file before its upload starts (the
length on the wire is then known, and another file's upload is on the wire meanwhile);
a compressed member, which would have to be decompressed twice for that, goes plain."""

from __future__ import annotations

import struct
from collections.abc import Iterator

from registry.carton.streams import MiB
from registry.chunking import ChunkParams
from registry.client.transport import Progress

RECORDS_PART = MiB
"""Bytes of chunks per part handed to the connection: few sends, one copy of each byte."""
_LENGTH = struct.Struct(">I")


def cut_lengths(params: ChunkParams, view: memoryview) -> list[int]:
    """The lengths of the chunks FastCDC cuts ``view`` into, in order."""
    return [cut.length for cut in params.fastcdc().cut_buf(view)]


def body_size(lengths: list[int]) -> int:
    """Bytes of the upload's body: the chunks and a length before each."""
    return sum(lengths) + _LENGTH.size * len(lengths)


def cut_body(view: memoryview, lengths: list[int], progress: Progress | None) -> Iterator[bytes]:
    """The records of ``view`` cut at ``lengths`` (module doc), about ``RECORDS_PART`` at a
    time; ``progress`` is told the file bytes each part holds."""
    parts: list[bytes | memoryview] = []
    at = size = 0
    for length in lengths:
        parts += (_LENGTH.pack(length), view[at : at + length])
        at += length
        size += length
        if size >= RECORDS_PART or at == len(view):
            yield b"".join(parts)
            if progress is not None:
                progress(size)
            parts, size = [], 0
