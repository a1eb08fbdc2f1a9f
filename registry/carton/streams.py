"""Byte-stream plumbing every layer shares: sizes, full reads, hashing, counting, adapting.

Standard library only, but for ``crc32``: python-isal's (ISA-L's CRC-32, 4-5x zlib's
here, and a push computes one over every byte it receives). It lives in ``carton/``
because the carton format imports nothing of ours (DESIGN.md "Layout") yet needs these
helpers too; the blob store, the services, the HTTP layer and the client import them
from here rather than keeping their own.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, BinaryIO, Protocol, TypeAlias

from isal.isal_zlib import crc32 as crc32

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

CHUNK = MiB
"""Read size when streaming blobs, members and bodies: few calls, flat memory."""


class Readable(Protocol):
    """What the helpers below read from: a file, a ``BinaryIO`` or one of the raw
    streams here (``MemberReader`` is one), which ``BinaryIO`` does not cover."""

    def read(self, size: int = -1, /) -> bytes: ...


ByteStream: TypeAlias = BinaryIO | io.RawIOBase
"""A readable, closable stream of bytes: a file, or a raw stream such as those below."""


def read_full(stream: Readable, size: int) -> bytes:
    """Read ``size`` bytes, looping over short reads; fewer only at EOF.

    Equal chunks matter where the chunking shows in the output (compressors, S3 parts).
    """
    first = stream.read(size)
    if not first or len(first) >= size:
        return first or b""
    parts = [first]
    got = len(first)
    while got < size:
        data = stream.read(size - got)
        if not data:
            break
        parts.append(data)
        got += len(data)
    return b"".join(parts)


def pread_range(
    fd: int, start: int, stop: int, chunk_size: int = CHUNK, short: Exception | None = None
) -> Iterator[bytes]:
    """Bytes ``[start, stop)`` of ``fd`` in fresh pieces of at most ``chunk_size``, each one
    ``os.pread`` (one copy from the page cache, no file object); a file that ends early
    raises ``short`` (None: the read just ends, as a blob read past its end does)."""
    position = start
    while position < stop:
        piece = os.pread(fd, min(chunk_size, stop - position), position)
        if not piece:
            if short is not None:
                raise short
            return
        position += len(piece)
        yield piece


def hash_stream(stream: Readable, chunk_size: int = CHUNK) -> tuple[str, int]:
    """Consume ``stream`` to EOF; return (sha256 hex, size)."""
    h = hashlib.sha256()
    size = 0
    while data := stream.read(chunk_size):
        h.update(data)
        size += len(data)
    return h.hexdigest(), size


class ReadStream(io.RawIOBase):
    """A raw stream whose subclass implements ``read``; ``readinto`` copies what it gives
    (RawIOBase has it the other way round, which costs a copy per ``read``)."""

    def readinto(self, buffer: WriteableBuffer, /) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)


class ChecksumReader(io.RawIOBase):
    """Wraps a readable stream; counts bytes and CRC-32 (zip needs it) as the consumer reads.

    No sha256: the blob store hashes what it writes already.
    """

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self.size = 0
        self.crc32 = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer, /) -> int:
        view = memoryview(buffer).cast("B")
        data = self._raw.read(len(view))
        n = len(data)
        view[:n] = data
        self._account(data)
        return n

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self._account(data)
        return data

    def _account(self, data: bytes) -> None:
        if data:
            self.size += len(data)
            self.crc32 = crc32(data, self.crc32)

    def drain(self) -> None:
        while self.read(CHUNK):
            pass


class IteratorReader(io.RawIOBase):
    """A file-like view of an iterator of byte chunks (HTTP bodies into blob stores)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer, /) -> int:
        while not self._pending:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                return 0
        view = memoryview(buffer).cast("B")
        n = min(len(view), len(self._pending))
        view[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


class PieceReader:
    """A stream read in the pieces it gives (``CHUNK`` at most), handed out as views into
    them: for bodies framed in records (chunk uploads, cut uploads), whose records are
    copied only when they span two pieces."""

    def __init__(self, body: Readable) -> None:
        self._body = body
        self._piece = memoryview(b"")
        self._at = 0

    def take(self, n: int) -> bytes | memoryview:
        """The next ``n`` bytes (fewer only at the end of the body)."""
        if len(self._piece) - self._at >= n:
            self._at += n
            return self._piece[self._at - n : self._at]
        rest = self._piece[self._at :]
        # A record at a piece's start is not copied.
        parts: list[bytes | memoryview] = [rest] if len(rest) else []
        got = len(rest)
        while got < n:
            piece = self._body.read(CHUNK)
            if not piece:
                self._piece, self._at = memoryview(b""), 0
                return b"".join(parts)
            if got + len(piece) > n:  # the rest stays for the next record
                self._piece, self._at = memoryview(piece), n - got
                parts.append(self._piece[: self._at])
                break
            parts.append(piece)
            got += len(piece)
        else:
            self._piece, self._at = memoryview(b""), 0
        return parts[0] if len(parts) == 1 else b"".join(parts)
