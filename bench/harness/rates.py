"""The machine's own limits, timed in-process: the references the figures' ratios divide by."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path

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
