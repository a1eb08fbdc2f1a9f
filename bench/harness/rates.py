"""The machine's own limits, timed in-process: the references the figures' ratios divide by."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path
from typing import Protocol

from bench.harness import CHUNK, MiB
from bench.harness.data import POOL_SIZE, file_chunks, member_data_ranges, pool


def sha256_file_rate(path: Path) -> tuple[float, str]:
    """(seconds, hex) of read + hashlib.sha256 over a file (page cache), 1 MiB reads."""
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    h = hashlib.sha256()
    t = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return time.perf_counter() - t, h.hexdigest()


def unzstd_sha_rate(path: Path) -> float:
    """Seconds to stream-decompress every zstd member and sha256 every member's content."""
    from backports.zstd import ZstdDecompressor

    ranges = member_data_ranges(path)
    t = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        for _name, start, csize, method in ranges:
            f.seek(start)
            h = hashlib.sha256()
            d = ZstdDecompressor() if method == 93 else None
            left = csize
            while left > 0:
                data = f.read(min(CHUNK, left))
                if not data:
                    break
                left -= len(data)
                h.update(d.decompress(data) if d else data)
            h.hexdigest()
    return time.perf_counter() - t


SINGLE_PASS_PIECE = MiB
"""Read size of the single pass, and the chunker's batch, so every full piece is cut (joined,
copied once) at once. Of 1-16 MiB tried here, 1-2 MiB was fastest (the join stays in
cache): 4-16 MiB pieces were 5-15 % slower on Stored bytes, up to 40 % on zstd members."""


class _Decompressor(Protocol):
    def decompress(self, data: bytes | memoryview) -> bytes: ...


class _OnePass:
    """sha256 and FastCDC + BLAKE3 of one stream, fed pieces: what a push computes per byte.

    A piece may be a view of a buffer the caller reuses: a full piece is cut (and so
    copied into the chunker's join) before ``feed`` returns; a shorter one is copied.
    """

    def __init__(self, piece: int) -> None:
        from registry.chunking import Chunker, ChunkParams, chunk_hash

        self._name = chunk_hash
        self.piece = piece
        self.sha = hashlib.sha256()
        self.chunker = Chunker(ChunkParams(), batch=piece)
        self.chunks = 0

    def feed(self, data: bytes | memoryview) -> None:
        self.sha.update(data)
        if len(data) < self.piece and not isinstance(data, bytes):
            data = bytes(data)
        for c in self.chunker.feed(data):
            self._name(c)
            self.chunks += 1

    def finish(self) -> str:
        for c in self.chunker.finish():
            self._name(c)
            self.chunks += 1
        return self.sha.hexdigest()


def _check_piece(piece: int) -> None:
    if not MiB <= piece <= 16 * MiB:
        raise ValueError("the single pass reads 1 MiB to 16 MiB at a time")


def single_pass_seconds(path: Path, piece: int = SINGLE_PASS_PIECE) -> float:
    """Seconds for the push's per-byte work on one thread, on the file's bytes (page cache).

    Read in ``piece``-sized ``readinto`` calls into one reused buffer, sha256 of every
    byte, and the registry's own chunker (``registry.chunking.Chunker``, FastCDC) over
    the same bytes with BLAKE3 (``chunk_hash``) of every chunk: everything a push of a
    Stored carton must compute, without receiving or writing anything. Call ``warm``
    on the file first.
    """
    _check_piece(piece)
    buf = bytearray(piece)
    view = memoryview(buf)
    t = time.perf_counter()
    one = _OnePass(piece)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            one.feed(view[:n])
    one.finish()
    return time.perf_counter() - t


def unzstd_single_pass_seconds(path: Path, piece: int = SINGLE_PASS_PIECE) -> float:
    """``single_pass_seconds`` over every member's content, zstd members stream-decompressed.

    Walks the members as ``unzstd_sha_rate`` does (data ranges from the central
    directory); each member gets its own sha256 and chunker, as each file does in a push.
    """
    from backports.zstd import ZstdDecompressor

    _check_piece(piece)
    ranges = member_data_ranges(path)
    buf = bytearray(piece)
    view = memoryview(buf)
    t = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        for _name, start, csize, method in ranges:
            f.seek(start)
            one = _OnePass(piece)
            d: _Decompressor | None = ZstdDecompressor() if method == 93 else None
            left = csize
            while left > 0:
                n = f.readinto(view[: min(piece, left)])
                if not n:
                    break
                left -= n
                one.feed(d.decompress(view[:n]) if d else view[:n])
            one.finish()
    return time.perf_counter() - t


def sha256_mem_rate(size: int) -> float:
    """Seconds for hashlib.sha256 over ``size`` bytes already in memory (1 MiB updates)."""
    view = memoryview(pool())
    h = hashlib.sha256()
    t = time.perf_counter()
    done = 0
    while done < size:
        off = done % (POOL_SIZE - MiB)
        h.update(view[off : off + MiB])
        done += MiB
    return time.perf_counter() - t


def write_fsync_rate(directory: Path, size: int) -> float:
    """Seconds to write ``size`` bytes (from memory) to a new file and fsync it."""
    data = pool()[: 4 * MiB]
    path = directory / "fsync-probe.bin"
    t = time.perf_counter()
    with open(path, "wb", buffering=0) as f:
        left = size
        while left > 0:
            n = f.write(data[: min(len(data), left)])
            left -= n
        os.fsync(f.fileno())
    dt = time.perf_counter() - t
    path.unlink()
    return dt


def cat_seconds(path: Path) -> float:
    """`cat file > /dev/null`, timed around the subprocess (file assumed warm)."""
    t = time.perf_counter()
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True, timeout=120)
    return time.perf_counter() - t


def warm(path: Path) -> None:
    """Read a file once so the timed reads that follow come from the page cache."""
    for _ in file_chunks(path, 4 * MiB):
        pass
