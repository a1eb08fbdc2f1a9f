"""Cut uploads: a whole file sent as the chunks its sender cut (docs/chunk-transfer.md).

``PUT /api/v1/blobs/{sha256}`` with ``Content-Type: application/vnd.carton.cut-file``:
the body is the file's bytes as records, one per chunk in file order, each a 4-byte
big-endian length and that many bytes. The registry names every chunk (BLAKE3) and
hashes the file (sha256) as for a plain whole upload, but does not cut it again: the
sender's FastCDC pass, on its own cores, stands in for the registry's, which is a
quarter of the thread a push is bound by (issue 27).

Cuts are the sender's word here as they are in chunk uploads and assemblies: no check
of integrity rests on them (each chunk is named from its own bytes here, the file
checked against its sha256 before it exists), and a sender that cuts elsewhere than
FastCDC would only store its own file in chunks that other files do not share. The
bounds are those of an assembly: every chunk but the last is ``min_size`` to
``max_size`` bytes, the last 1 to ``max_size``, so a body holds no more records than
FastCDC's cut of the same bytes could.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from registry.carton.streams import MiB, PieceReader, Readable
from registry.chunking import ChunkParams
from registry.errors import InvalidBody

CUT_UPLOAD_TYPE = "application/vnd.carton.cut-file"
GROUP_BYTES = MiB
"""Chunk bytes joined into one piece for the pack session's chunking thread (the
records' headers left out): the size of the pieces a plain upload hands it."""
_LENGTH = struct.Struct(">I")


def cut_records(body: Readable, params: ChunkParams) -> Iterator[tuple[bytes, list[int]]]:
    """(bytes, lengths) of whole chunks, about ``GROUP_BYTES`` at a time, in file order;
    ``InvalidBody`` (400) when a record is malformed, out of bounds, or cut short."""
    pieces = PieceReader(body)
    parts: list[bytes | memoryview] = []
    lengths: list[int] = []
    size = 0
    short = 0  # the length of the previous chunk if under min_size: it had to be the last
    while head := pieces.take(_LENGTH.size):
        if len(head) != _LENGTH.size:
            raise InvalidBody("cut upload ends inside a record's length")
        if short:
            raise InvalidBody(
                f"a chunk of {short} bytes before the file's last; chunks before the last "
                f"are {params.min_size} to {params.max_size} bytes"
            )
        (length,) = _LENGTH.unpack(head)
        if not 0 < length <= params.max_size:
            raise InvalidBody(f"a chunk of {length} bytes; chunks are 1 to {params.max_size}")
        data = pieces.take(length)
        if len(data) != length:
            raise InvalidBody("cut upload ends inside a chunk")
        short = length if length < params.min_size else 0
        parts.append(data)
        lengths.append(length)
        size += length
        if size >= GROUP_BYTES:
            yield b"".join(parts), lengths
            parts, lengths, size = [], [], 0
    if parts:
        yield b"".join(parts), lengths
