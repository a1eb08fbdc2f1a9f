"""The shared stream helpers: full reads over short reads, hashing, counting, adapting."""

from __future__ import annotations

import hashlib
import io
import zlib

from registry.carton.streams import ChecksumReader, IteratorReader, hash_stream, read_full


class Dribble(io.RawIOBase):
    """Hands out at most ``step`` bytes per read, like a socket or a member reader."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data, self._pos, self._step = data, 0, step

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        n = min(len(buffer), self._step, len(self._data) - self._pos)
        buffer[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        return n


def test_read_full_loops_over_short_reads_until_eof() -> None:
    stream = Dribble(b"abcdefghij", step=3)
    assert read_full(stream, 7) == b"abcdefg"
    assert read_full(stream, 7) == b"hij"
    assert read_full(stream, 7) == b""


def test_hash_stream_reads_to_eof() -> None:
    data = bytes(range(256)) * 100
    assert hash_stream(Dribble(data, step=999), chunk_size=4096) == (
        hashlib.sha256(data).hexdigest(),
        len(data),
    )
    assert hash_stream(io.BytesIO(b"")) == (hashlib.sha256(b"").hexdigest(), 0)


def test_checksum_reader_counts_what_the_consumer_read() -> None:
    data = b"carton bytes " * 1000
    reader = ChecksumReader(io.BytesIO(data))
    head = reader.read(10)
    buffer = bytearray(100)
    n = reader.readinto(buffer)
    assert reader.size == 10 + n
    assert reader.crc32 == zlib.crc32(head + bytes(buffer[:n]))
    reader.drain()
    assert (reader.size, reader.crc32) == (len(data), zlib.crc32(data))


def test_iterator_reader_joins_the_chunks_into_one_stream() -> None:
    reader = IteratorReader(iter([b"ab", b"", b"cdef", b"g"]))
    assert reader.read(1) == b"a"
    assert read_full(reader, 3) == b"bcd"
    assert reader.read() == b"efg"
    assert reader.read(1) == b""
