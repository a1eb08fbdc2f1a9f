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
from typing import Any

import blake3
from pyfastcdc import FastCDC, NormalizedChunking

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
        return FastCDC(
            self.avg_size,
            min_size=self.min_size,
            max_size=self.max_size,
            normalized_chunking=self.normalization,
        )


def chunk_hash(data: bytes | bytearray | memoryview) -> str:
    """The name of a chunk: lowercase hex BLAKE3 of its bytes."""
    return blake3.blake3(data).hexdigest()


class Chunker:
    """Cut a stream fed in pieces of any size exactly where one cut over the whole would.

    FastCDC decides a cut from at most ``max_size`` bytes after a chunk's start,
    so a chunk is final once that many bytes (or the end of the stream) follow
    its start; the rest waits for more input.
    """

    def __init__(self, params: ChunkParams, *, batch: int = 4 * MiB) -> None:
        self.params = params
        self._cdc = params.fastcdc()
        self._buf = bytearray()
        self._batch = max(batch, 2 * params.max_size)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """The chunks that ``data`` completes (possibly none)."""
        self._buf += data
        if len(self._buf) < self._batch:
            return []
        return self._cut(final=False)

    def finish(self) -> list[bytes]:
        """The remaining chunks, at the end of the stream."""
        return self._cut(final=True)

    def _cut(self, *, final: bool) -> list[bytes]:
        buf = self._buf
        horizon = len(buf) if final else len(buf) - self.params.max_size
        chunks: list[bytes] = []
        done = 0
        chunk = None
        with memoryview(buf) as view:
            for chunk in self._cdc.cut_buf(view):
                if chunk.offset >= horizon:
                    break
                chunks.append(bytes(chunk.data))
                done = chunk.offset + chunk.length
            del chunk  # drop the last view into ``buf`` before it is resized
        del buf[:done]
        return chunks


def iter_chunks(params: ChunkParams, pieces: Iterator[bytes]) -> Iterator[bytes]:
    """Every chunk of the stream made of ``pieces``."""
    chunker = Chunker(params)
    for piece in pieces:
        yield from chunker.feed(piece)
    yield from chunker.finish()
