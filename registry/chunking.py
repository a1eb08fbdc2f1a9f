"""Content-defined chunking: where a file is cut, and what each chunk is called.

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

    Pieces are joined once per batch and chunks are handed out as views into that
    immutable join: every byte is copied at most once here, never per chunk (a fresh
    ``bytes`` per chunk cost more than the cutting: each 80 KiB allocation faults its
    pages in anew). A batch of one ``bytes`` piece is not copied, and one of the carried
    chunk and a large ``bytes`` piece (a MiB the server received) has only the carried
    chunk and a ``max_size`` of the piece joined (``_uncut``: 1 GiB pushed 2.26 against
    2.33 s, alternated). A chunk's view keeps its whole join or piece alive, so joins
    stay small (``batch``, 1 MiB); the chunk carried into the next join, cut and copied
    again, is about a twelfth of it. 4 MiB joins pushed 1 GiB about 4 % faster (a
    quarter of the cuts, carries and naming tasks), but a pushing server's peak grew with
    the push: 189 -> 223 MiB for 16 GiB (2 MiB joins: 196),
    likely holes the heap keeps where joins of many sizes were freed out of order.
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
        chunks: list[memoryview] = []
        view = self._uncut(chunks)
        end, max_size = len(view), self.params.max_size
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

    def _uncut(self, chunks: list[memoryview]) -> memoryview:
        """The pending bytes as one view, to cut from its start: the pieces joined, or one
        ``bytes`` piece as it is. Where a short piece (the chunk carried from the last
        cut) precedes one large ``bytes`` piece, only it and that piece's first
        ``max_size`` bytes are joined: every chunk that starts in the short piece ends
        within them and is cut there, as over the whole (more than ``max_size`` bytes
        follow its start), into ``chunks``; the view is the rest of the large piece,
        cut in place. A received MiB is then copied a quarter, not whole."""
        pieces, max_size = self._pieces, self.params.max_size
        if len(pieces) == 1 and isinstance(pieces[0], bytes):
            return memoryview(pieces[0])
        if len(pieces) != 2 or not isinstance(pieces[1], bytes) or len(pieces[1]) < 2 * max_size:
            return memoryview(b"".join(pieces))
        head, piece = pieces
        bridge = memoryview(b"".join((head, memoryview(piece)[:max_size])))
        stop = 0
        for chunk in self._cdc.cut_buf(bridge):
            if chunk.offset >= len(head):
                break
            stop = chunk.offset + chunk.length
            chunks.append(bridge[chunk.offset : stop])
        return memoryview(piece)[stop - len(head) :]


def iter_chunks(params: ChunkParams, pieces: Iterator[bytes]) -> Iterator[memoryview]:
    """Every chunk of the stream made of ``pieces``."""
    chunker = Chunker(params)
    for piece in pieces:
        yield from chunker.feed(piece)
    yield from chunker.finish()
