"""Content-defined chunking: where a file is cut, what each chunk is called, and how chunks
are framed on the wire (uploads of chunks and of cut files).

Pure (no I/O, no database, nothing else of ours): the registry and the client
import it at the top and cut files the same way, so the chunk parameters travel
with the registry (``GET /api/v1/chunking``) and both sides always agree.
Boundaries come from FastCDC 2020 (``pyfastcdc``, Cython, cuts without holding
the GIL), so an insertion or deletion re-aligns after a chunk or two. Chunks are
named by BLAKE3, a cryptographic hash (a forged collision would let one uploader
corrupt another's model), faster than sha256 here; a file keeps its sha256 as
its identity everywhere.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

import blake3

if TYPE_CHECKING:
    from pyfastcdc import FastCDC

# pyfastcdc's own alias, spelled here: the API's schema reads this annotation at run time
# and pyfastcdc is imported on the first cut only.
NormalizedChunking = Literal[0, 1, 2, 3]

KiB = 1024
MiB = 1024 * KiB

CHUNK_HASH = "blake3"

# How chunks travel (docs/chunk-transfer.md), for the registry and the client alike.
CHUNK_RECORD = struct.Struct(">32sI")
"""A chunk upload's record: the chunk's BLAKE3 digest and length, then its bytes."""
CUT_RECORD = struct.Struct(">I")
"""A cut upload's record: the chunk's length, then its bytes (named where it arrives)."""
CUT_FILE_HEADER = struct.Struct(">32sQ")
"""A file of a cut upload of several files: its sha256 and size, then its cut records."""


@dataclass(frozen=True)
class ChunkParams:
    """FastCDC parameters; chunks average about ``avg_size + min_size`` bytes."""

    avg_size: int = 64 * KiB
    min_size: int = 16 * KiB
    max_size: int = 256 * KiB
    normalization: NormalizedChunking = 1
    hash: str = CHUNK_HASH

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> ChunkParams:
        known = {k: body[k] for k in cls.__dataclass_fields__ if k in body}
        params = cls(**known)
        if params.hash != CHUNK_HASH:
            raise ValueError(f"unsupported chunk hash {params.hash!r} (this client: blake3)")
        return params

    def fastcdc(self) -> FastCDC:
        # Imported on the first cut: a command that cuts nothing (a re-push, a pull)
        # starts without it (a tenth of the push command's own imports).
        from pyfastcdc import FastCDC

        return FastCDC(
            self.avg_size,
            min_size=self.min_size,
            max_size=self.max_size,
            normalized_chunking=self.normalization,
        )


def chunk_hash(data: bytes | bytearray | memoryview) -> str:
    """The name of a chunk: lowercase hex BLAKE3 of its bytes."""
    return blake3.blake3(data).hexdigest()


Buffer = bytes | bytearray | memoryview


class Chunker:
    """Cut a stream fed in pieces of any size exactly where one cut over the whole would.

    FastCDC cuts a chunk at the first cut point it finds after ``min_size`` bytes (with
    the stricter mask up to ``avg_size``), or at ``max_size``: a cut found before the
    end of the input, or at ``max_size``, depends on no byte after it and is final.
    Only the last chunk, cut because the input ended, waits for more input: about one
    chunk is cut twice per batch, not the ``max_size`` tail (a quarter of each batch
    was cut twice before).

    Pieces are joined once per batch (no copy when a batch is one ``bytes`` piece) and
    chunks are handed out as views into that immutable join: every byte is copied at
    most once here, never per chunk (a fresh ``bytes`` per chunk cost more than the
    cutting: each 80 KiB allocation faults its pages in anew). A chunk's view keeps its
    whole join alive, so joins stay small (``batch``, 1 MiB); the chunk carried into the
    next join, cut and copied again, is about a twelfth of it. 4 MiB joins pushed 1 GiB
    about 4 % faster (a quarter of the cuts, carries and naming tasks), but a pushing
    server's peak grew with the push: 189 -> 223 MiB for 16 GiB (2 MiB joins: 196),
    likely holes the heap keeps where joins of many sizes were freed out of order.
    Cutting a received MiB in place after the carried chunk (joining only the carried
    chunk and ``max_size`` of the piece) pushed 1 GiB 3 % faster (2.33 -> 2.26 s), but
    the 16 GiB push then peaked at 207 against 190 MiB: the pieces, allocated on the
    event loop's thread, then lived until placed (61508ae, reverted).
    """

    def __init__(self, params: ChunkParams, *, batch: int = MiB) -> None:
        self.params = params
        self._cdc = params.fastcdc()
        self._pieces: list[Buffer] = []
        self._pending = 0
        self._batch = max(batch, 2 * params.max_size)

    def feed(self, data: Buffer) -> list[memoryview]:
        """The chunks that ``data`` completes (possibly none). ``data`` must not change
        afterwards: it may be cut without a copy."""
        if data:
            self._pieces.append(data)
            self._pending += len(data)
        if self._pending < self._batch:
            return []
        return self._cut(final=False)

    def finish(self) -> list[memoryview]:
        """The remaining chunks, at the end of the stream."""
        return self._cut(final=True)

    def _cut(self, *, final: bool) -> list[memoryview]:
        pieces = self._pieces
        whole = pieces[0] if len(pieces) == 1 and isinstance(pieces[0], bytes) else None
        view = memoryview(whole if whole is not None else b"".join(pieces))
        end, max_size = len(view), self.params.max_size
        chunks: list[memoryview] = []
        done = 0
        for chunk in self._cdc.cut_buf(view):
            stop = chunk.offset + chunk.length
            if stop == end and not final and chunk.length < max_size:
                break  # cut by the end of the input: more input may cut it elsewhere
            chunks.append(view[chunk.offset : stop])
            done = stop
        rest = view[done:]
        self._pieces = [rest] if rest else []
        self._pending = len(rest)
        return chunks


def iter_chunks(params: ChunkParams, pieces: Iterator[bytes]) -> Iterator[memoryview]:
    """Every chunk of the stream made of ``pieces``."""
    chunker = Chunker(params)
    for piece in pieces:
        yield from chunker.feed(piece)
    yield from chunker.finish()
