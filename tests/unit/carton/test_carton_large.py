"""A 1 GiB member is written and read back with bounded memory (streams, not buffers)."""

from __future__ import annotations

import hashlib
import io
import tracemalloc
import zlib
from collections.abc import Iterator

import pytest

from registry.carton import (
    ArchiveLimits,
    CartonArchive,
    StoredZipLayout,
    ZipEntry,
    build_manifest,
    sha256_member,
    write_zip,
)

from .carton_testlib import MINIMAL_TOML, crc32_zeros, sha, zeros_range

GIB = 1 << 30
PEAK_LIMIT = 50 << 20


def _sha256_zeros(size: int) -> str:
    h = hashlib.sha256()
    block = bytes(1 << 20)
    for _ in range(size >> 20):
        h.update(block)
    return h.hexdigest()


class ZeroReader(io.RawIOBase):
    """A file object of ``size`` zero bytes, generated on demand."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.left = size

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        n = self.left if n is None or n < 0 else min(n, self.left)
        self.left -= n
        return bytes(n)


def _entries(size: int, digest: str) -> list[ZipEntry]:
    manifest = build_manifest([("carton.toml", sha(MINIMAL_TOML)), ("model/big.bin", digest)])

    def const(data: bytes):
        def read_range(offset: int, length: int) -> Iterator[bytes]:
            yield data[offset : offset + length]

        return read_range

    return [
        ZipEntry("carton.toml", len(MINIMAL_TOML), zlib.crc32(MINIMAL_TOML), const(MINIMAL_TOML)),
        ZipEntry("model/big.bin", size, crc32_zeros(size), zeros_range),
        ZipEntry("MANIFEST", len(manifest.raw), zlib.crc32(manifest.raw), const(manifest.raw)),
    ]


@pytest.mark.slow
def test_one_gib_member_bounded_memory(tmp_path):
    size = GIB
    digest = _sha256_zeros(size)
    path = tmp_path / "big.carton"
    tracemalloc.start()
    try:
        layout = StoredZipLayout(_entries(size, digest))
        with open(path, "wb") as f:
            assert layout.write_to(f) == layout.size
        assert path.stat().st_size == layout.size
        with CartonArchive.open(path) as a:
            assert a.members["model/big.bin"].size == size
            assert sha256_member(a, "model/big.bin") == (digest, size)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(f"peak traced memory: {peak / 2**20:.1f} MiB")
    assert peak < PEAK_LIMIT, f"peak traced memory {peak} bytes"


@pytest.mark.slow
def test_one_gib_zstd_member_streamed_bounded_memory(tmp_path):
    """write_zip with a generator-backed file; zstd frames without content size, streamed."""
    size = GIB
    digest = _sha256_zeros(size)
    manifest = build_manifest([("carton.toml", sha(MINIMAL_TOML)), ("model/big.bin", digest)])
    path = tmp_path / "big-zstd.carton"
    tracemalloc.start()
    try:
        with open(path, "wb") as f:
            write_zip(
                f,
                [
                    ("carton.toml", lambda: io.BytesIO(MINIMAL_TOML), 93),
                    ("model/big.bin", lambda: ZeroReader(size), 93),
                    ("MANIFEST", lambda: io.BytesIO(manifest.raw), 0),
                ],
            )
        # zeros compress far beyond the default ratio limit; raise it for this test
        limits = ArchiveLimits(max_compression_ratio=1e9)
        with CartonArchive.open(path, limits) as a:
            assert sha256_member(a, "model/big.bin") == (digest, size)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(f"peak traced memory: {peak / 2**20:.1f} MiB")
    assert peak < PEAK_LIMIT, f"peak traced memory {peak} bytes"
