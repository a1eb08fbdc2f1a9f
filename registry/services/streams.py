"""Small stream adapters: count and checksum bytes as they pass, without a second read."""

from __future__ import annotations

import hashlib
import io
import zlib
from collections.abc import Iterable, Iterator
from typing import BinaryIO

CHUNK = 1024 * 1024


class ChecksumReader(io.RawIOBase):
    """Wraps a readable stream; counts bytes and CRC-32 (zip needs it) as the consumer reads.

    sha256 is optional: the blob store already hashes what it writes, so only the
    verify-only path asks for it here.
    """

    def __init__(self, raw: BinaryIO, *, sha256: bool = False) -> None:
        self._raw = raw
        self.size = 0
        self.crc32 = 0
        self._sha = hashlib.sha256() if sha256 else None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self._account(data)
        return n

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self._account(data)
        return data

    def _account(self, data: bytes) -> None:
        if data:
            self.size += len(data)
            self.crc32 = zlib.crc32(data, self.crc32)
            if self._sha is not None:
                self._sha.update(data)

    def drain(self) -> None:
        while self.read(CHUNK):
            pass

    @property
    def sha256(self) -> str:
        if self._sha is None:
            raise RuntimeError("sha256 was not requested")
        return self._sha.hexdigest()


class IteratorReader(io.RawIOBase):
    """A file-like view of an iterator of byte chunks (HTTP bodies into blob stores)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._pending:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n
