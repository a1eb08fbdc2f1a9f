"""A push reads a small body whole before it decides how to ingest it; a large one is given
back to the regular push byte for byte."""

from __future__ import annotations

import io
import os

from registry.services.ingest.repush import FAST_MAX_BYTES, read_ahead


class Trickle:
    """A source that answers at most ``step`` bytes a read, as a network body does."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data = io.BytesIO(data)
        self.step = step

    def read(self, size: int = -1, /) -> bytes:
        return self._data.read(self.step if size < 0 else min(size, self.step))


def read_all(reader, size: int) -> bytes:  # type: ignore[no-untyped-def]
    parts = []
    while chunk := reader.read(size):
        parts.append(chunk)
    return b"".join(parts)


def test_a_small_body_is_read_whole_and_given_back():
    data = os.urandom(5000)
    body, reader = read_ahead(Trickle(data, 700))
    assert body == data
    assert read_all(reader, 1024) == data
    body, reader = read_ahead(Trickle(b"", 1))
    assert body == b"" and reader.read() == b""


def test_a_body_just_at_the_limit_is_still_small():
    data = os.urandom(FAST_MAX_BYTES)
    body, _ = read_ahead(Trickle(data, 100_000))
    assert body == data


def test_a_large_body_is_given_back_byte_for_byte():
    data = os.urandom(FAST_MAX_BYTES + 12_345)
    body, reader = read_ahead(Trickle(data, 65_536))
    assert body is None
    assert read_all(reader, 300_000) == data
    _, reader = read_ahead(Trickle(data, 65_536))
    assert reader.read(10) == data[:10]
    assert reader.read() == data[10:]  # the rest at once: what was read ahead, then the source
