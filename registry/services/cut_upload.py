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

from collections.abc import Iterator

from registry.carton.streams import PieceReader, Readable
from registry.chunking import CUT_FILE_HEADER, CUT_RECORD, ChunkParams
from registry.errors import InvalidBody

CUT_UPLOAD_TYPE = "application/vnd.carton.cut-file"
CUT_FILES_TYPE = "application/vnd.carton.cut-files"
"""``POST /api/v1/blobs``: several files in one request, each a header (its sha256 as 32
bytes, its size as 8 big-endian bytes) and its chunks as a cut upload's records: one
lease, one pack session and one index transaction for all of them, where one request
each paid those per file and left the wire idle while each small file was finished."""


def cut_records(
    body: Readable | PieceReader, params: ChunkParams, size: int | None = None
) -> Iterator[bytes | memoryview]:
    """The file's chunks one by one, in order, until the body ends (or, given ``size``,
    once they hold that many bytes: one file of a ``cut_files`` body). A chunk is a view
    into the piece received when it lies in one, joined only when it spans two: no copy
    of every byte to take the records' lengths out (that was 0.18 CPU-s a GiB on the
    thread that receives, as much as half of the FastCDC pass a cut upload saves).
    ``InvalidBody`` (400) when a record is malformed, out of bounds, cut short, or runs
    past ``size``."""
    pieces = body if isinstance(body, PieceReader) else PieceReader(body)
    done = 0
    short = 0  # the length of the previous chunk if under min_size: it had to be the last
    while (size is None or done < size) and (head := pieces.take(CUT_RECORD.size)):
        if len(head) != CUT_RECORD.size:
            raise InvalidBody("cut upload ends inside a record's length")
        if short:
            raise InvalidBody(
                f"a chunk of {short} bytes before the file's last; chunks before the last "
                f"are {params.min_size} to {params.max_size} bytes"
            )
        (length,) = CUT_RECORD.unpack(head)
        if not 0 < length <= params.max_size:
            raise InvalidBody(f"a chunk of {length} bytes; chunks are 1 to {params.max_size}")
        if size is not None and done + length > size:
            raise InvalidBody(f"the chunks run past the file's {size} bytes")
        data = pieces.take(length)
        if len(data) != length:
            raise InvalidBody("cut upload ends inside a chunk")
        short = length if length < params.min_size else 0
        done += length
        yield data
    if size is not None and done < size:
        raise InvalidBody(f"cut upload ends after {done} of a file's {size} bytes")


def cut_files(
    body: Readable, params: ChunkParams, min_bytes: int
) -> Iterator[tuple[str, int, Iterator[bytes | memoryview]]]:
    """(sha256, size, its chunks as ``cut_records`` gives them) of each file of a
    ``CUT_FILES_TYPE`` body, in order; a file's chunks are to be read before the next file
    is asked for. ``InvalidBody`` (400) for an empty body, a header cut short, a file of at
    most ``min_bytes`` (those go whole, one request each) and what ``cut_records`` refuses."""
    pieces = PieceReader(body)
    files = 0
    while head := pieces.take(CUT_FILE_HEADER.size):
        if len(head) != CUT_FILE_HEADER.size:
            raise InvalidBody("cut upload ends inside a file's header")
        digest, size = CUT_FILE_HEADER.unpack(head)
        if size <= min_bytes:
            raise InvalidBody(
                f"a file of {size} bytes; files of at most {min_bytes} bytes go one to a "
                "request (PUT /api/v1/blobs/{sha256})"
            )
        files += 1
        yield digest.hex(), size, cut_records(pieces, params, size)
    if not files:
        raise InvalidBody("an upload of no files")
