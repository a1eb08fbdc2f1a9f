"""Cut uploads, the client's side (the registry's: ``services.cut_upload``): a Stored file
the registry holds nothing of goes whole, as the records of the chunks FastCDC cuts here,
each a 4-byte big-endian length and its bytes. The registry names and hashes every byte
as for a plain whole upload but does not cut the file again: that was a quarter of the
thread a push is bound by there, and this process has a core and a GIL of its own.

A member of up to ``CUT_AHEAD_BYTES`` is cut where it lies in the mapped zip file before
its upload starts: the length on the wire is then known, and another file's upload is on
the wire meanwhile. A larger one is cut as it is sent (its body goes chunked), so its
first byte need not wait for a pass over all of it (16 GiB: several seconds); the cutting
still outruns the registry. So is a push's first whole upload, whatever its size: no
body is on the wire before it to hide its cut (a fresh 128 MiB file: 40-80 ms before its
first byte). A compressed member, which would have to be decompressed twice for that,
goes plain."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from registry.carton.streams import MiB
from registry.chunking import CUT_FILE_HEADER, CUT_RECORD, ChunkParams
from registry.client.transport import Progress

CUT_AHEAD_BYTES = 256 * MiB
"""The largest member cut whole before its upload starts (about 0.1 s of FastCDC here)."""
RECORDS_PART = MiB
"""Bytes of chunks per part handed to the connection: few sends, one copy of each byte."""


def cut_lengths(params: ChunkParams, view: memoryview, *, ahead: bool = True) -> Iterable[int]:
    """The lengths of the chunks FastCDC cuts ``view`` into, in order: all of them for a
    view of up to ``CUT_AHEAD_BYTES`` (unless not ``ahead``), else as they are cut
    (module doc)."""
    cuts = (cut.length for cut in params.fastcdc().cut_buf(view))
    return list(cuts) if ahead and len(view) <= CUT_AHEAD_BYTES else cuts


def body_size(lengths: Iterable[int]) -> int | None:
    """Bytes of the upload's body, the chunks and a length before each; None before the
    cut is done."""
    if not isinstance(lengths, list):
        return None
    return sum(lengths) + CUT_RECORD.size * len(lengths)


def cut_body(
    view: memoryview, lengths: Iterable[int], progress: Progress | None
) -> Iterator[bytes]:
    """The records of ``view`` cut at ``lengths`` (module doc), about ``RECORDS_PART`` at a
    time; ``progress`` is told the file bytes each part holds."""
    parts: list[bytes | memoryview] = []
    at = size = 0
    for length in lengths:
        parts += (CUT_RECORD.pack(length), view[at : at + length])
        at += length
        size += length
        if size >= RECORDS_PART or at == len(view):
            yield b"".join(parts)
            if progress is not None:
                progress(size)
            parts, size = [], 0


def files_size(files: list[tuple[str, memoryview, list[int]]]) -> int:
    """Bytes of the body of several files (``files_body``)."""
    return sum(
        CUT_FILE_HEADER.size + len(view) + CUT_RECORD.size * len(lengths)
        for _, view, lengths in files
    )


def files_body(
    files: list[tuple[str, memoryview, list[int]]], progress: Progress | None
) -> Iterator[bytes]:
    """The body of a cut upload of several files (the registry's ``CUT_FILES_TYPE``):
    per file, its sha256 (32 bytes) and size (8 bytes), then its records (``cut_body``)."""
    for sha256, view, lengths in files:
        yield CUT_FILE_HEADER.pack(bytes.fromhex(sha256), len(view))
        yield from cut_body(view, lengths, progress)
