"""One zip member's uncompressed bytes, streamed and verified as they are read.

zipfile silently truncates a member that inflates past its declared size; this reader
rejects it, and checks the CRC-32, in constant memory (Stored, Deflate and zstd).
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from .errors import CartonFormatError
from .streams import CHUNK, KiB, ReadStream, crc32
from .zipformat import DEFLATED, STORED, ZSTD
from .zstdmember import ZstdMemberDecoder

_READ_CHUNK = 256 * KiB


@dataclass(frozen=True)
class Member:
    """One file entry of the zip (directories are not members)."""

    path: str
    raw_name: str
    method: int
    compressed_size: int
    size: int
    crc32: int
    # For symlinks: the in-carton path of the regular member the link resolves to.
    symlink_target: str | None = None
    header_offset: int = 0
    is_symlink: bool = False


class MemberReader(ReadStream):
    """Streaming, verifying reader of one member's uncompressed bytes.

    Raises CartonFormatError when the data inflates past the declared size,
    ends short of it, is truncated/corrupt, or fails its CRC-32.
    """

    def __init__(
        self,
        member: Member,
        fp: BinaryIO,
        lock: threading.Lock | None,
        owns_fp: bool,
        data_offset: int,
    ) -> None:
        super().__init__()
        self.member = member
        self._fp = fp
        self._lock = lock
        self._owns_fp = owns_fp
        self._pos = data_offset
        self._left = member.compressed_size
        self._produced = 0
        self._crc = 0
        self._buf = b""
        self._done = False
        self._method = member.method
        self._zlib = zlib.decompressobj(-15) if self._method == DEFLATED else None
        self._zstd = (
            ZstdMemberDecoder(lambda: self._read_compressed(_READ_CHUNK), self._fail)
            if self._method == ZSTD
            else None
        )

    # -- raw compressed input -------------------------------------------------
    def _read_compressed(self, n: int) -> bytes:
        n = min(n, self._left)
        if n <= 0:
            return b""
        if self._lock is not None:
            with self._lock:
                self._fp.seek(self._pos)
                data = self._fp.read(n)
        else:
            self._fp.seek(self._pos)
            data = self._fp.read(n)
        if len(data) != n:
            raise CartonFormatError(f"{self.member.path}: archive truncated inside member data")
        self._pos += n
        self._left -= n
        return data

    def _fail(self, what: str) -> CartonFormatError:
        return CartonFormatError(f"{self.member.path}: {what}")

    # -- decompression ----------------------------------------------------------
    def _produce(self, n: int) -> bytes:
        """Up to ``n`` more bytes; the end (size, CRC) is verified before the last are returned."""
        data = self._next(n)
        if data and self._produced == self.member.size:
            self._next(1)  # raises if the stream inflates further; else checks the CRC
        return data

    def _next(self, n: int) -> bytes:
        """Up to ``n`` more uncompressed bytes; b"" only at the verified end of the member."""
        while True:
            if self._method == STORED:
                data = self._read_compressed(min(n, _READ_CHUNK))
                if not data:
                    return self._finish()
            elif self._method == DEFLATED:
                d = self._zlib
                assert d is not None
                if d.eof:
                    return self._finish()
                if d.unconsumed_tail:
                    data = d.decompress(d.unconsumed_tail, n)
                else:
                    chunk = self._read_compressed(_READ_CHUNK)
                    if not chunk:
                        raise self._fail("deflate stream is truncated")
                    try:
                        data = d.decompress(chunk, n)
                    except zlib.error as e:
                        raise self._fail(f"corrupt deflate data ({e})") from None
            else:
                assert self._zstd is not None
                step = self._zstd.step(n)
                if step is None:
                    return self._finish()
                data = step
            if data:
                self._produced += len(data)
                if self._produced > self.member.size:
                    raise self._fail(f"inflates past its declared size of {self.member.size} bytes")
                self._crc = crc32(data, self._crc)
                return data

    def _finish(self) -> bytes:
        if not self._done:
            self._done = True
            if self._produced != self.member.size:
                raise self._fail(
                    f"holds {self._produced} bytes but its header declares {self.member.size}"
                )
            if self._crc != self.member.crc32:
                raise self._fail(
                    f"CRC-32 mismatch (got {self._crc:08x}, header says {self.member.crc32:08x})"
                )
        return b""

    # -- io API -------------------------------------------------------------------
    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if self.closed:
            raise ValueError("read from closed member reader")
        if size is None or size < 0:
            return self.readall()
        if size == 0:
            return b""
        if self._buf:
            out, self._buf = self._buf[:size], self._buf[size:]
            return out
        data = self._produce(min(size, CHUNK))
        if len(data) > size:
            data, self._buf = data[:size], data[size:]
        return data

    def readall(self) -> bytes:
        parts = [self._buf]
        self._buf = b""
        while True:
            data = self._produce(CHUNK)
            if not data:
                return b"".join(parts)
            parts.append(data)

    def iter_chunks(self, chunk_size: int = CHUNK) -> Iterator[bytes]:
        """Yield the member in chunks; the last (empty) read verifies size and CRC."""
        while True:
            data = self.read(chunk_size)
            if not data:
                return
            yield data

    def close(self) -> None:
        if not self.closed and self._owns_fp:
            self._fp.close()
        super().close()
