"""The shared stream helpers: full reads over short reads, hashing, counting, adapting."""

from __future__ import annotations

import hashlib
import io
import zlib

from hypothesis import given
from hypothesis import strategies as st

from registry.carton.streams import ChecksumReader, IteratorReader, crc32, hash_stream, read_full


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


@given(st.lists(st.binary(max_size=9000), max_size=6), st.integers(0, 2**32 - 1))
def test_crc32_is_zip_crc32_over_any_split_and_start(pieces: list[bytes], start: int) -> None:
    """ISA-L's CRC-32 must be the zip format's (zlib's): a different polynomial or a
    different way of carrying the running value would make every CRC we write wrong."""
    ours, theirs = start, start
    for piece in pieces:
        ours, theirs = crc32(memoryview(piece), ours), zlib.crc32(piece, theirs)
    assert ours == theirs


def test_crc32_of_a_large_buffer_and_of_nothing() -> None:
    data = bytes(range(256)) * 40_000  # 10 MB: the library's wide path
    assert crc32(data) == zlib.crc32(data) and crc32(b"") == 0 == zlib.crc32(b"")
