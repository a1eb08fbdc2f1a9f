"""StreamedBody: a request body fed from the event loop to the worker thread reading it,
with its limits (size, Content-Length, stalls) surfacing in the reader."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from types import SimpleNamespace
from typing import Any

import anyio
import anyio.to_thread
import pytest

from registry.errors import TruncatedUpload, UploadStalled, UploadTooLarge
from registry.http import deps
from registry.http.deps import StreamedBody

KiB = 1024


class FakeRequest:
    """What StreamedBody uses of a Litestar request: headers, the idle timeout, stream()."""

    def __init__(
        self,
        pieces: list[bytes],
        *,
        declared: int | None = None,
        idle: float = 5.0,
        pause: float = 0.0,
        pause_after: int = 0,
    ) -> None:
        self.pieces = pieces
        self.headers = {} if declared is None else {"content-length": str(declared)}
        settings = SimpleNamespace(body_idle_timeout=idle)
        self.app = SimpleNamespace(state=SimpleNamespace(ctx=SimpleNamespace(settings=settings)))
        self.pause, self.pause_after = pause, pause_after
        self.sent = 0

    async def stream(self) -> AsyncIterator[bytes]:
        for i, piece in enumerate(self.pieces):
            if self.pause and i == self.pause_after:
                await anyio.sleep(self.pause)
            self.sent += 1
            yield piece


def consume(
    request: FakeRequest, reader: Callable[[StreamedBody], Any], max_bytes: int = 1 << 30
) -> Any:
    async def main() -> Any:
        body = StreamedBody(request, max_bytes)  # type: ignore[arg-type]
        async with body.feeding():
            return await anyio.to_thread.run_sync(reader, body)

    return anyio.run(main)


def read_all(body: StreamedBody) -> list[bytes]:
    return list(iter(lambda: body.read(1 << 20), b""))


def test_the_body_arrives_whole_in_the_pieces_received_never_joined():
    pieces = [bytes([i]) * (100 * KiB + i) for i in range(40)]
    got = consume(FakeRequest(pieces, declared=sum(map(len, pieces))), read_all)
    assert b"".join(got) == b"".join(pieces)
    assert all(g is p for g, p in zip(got, pieces, strict=True))


def test_small_reads_slice_a_piece():
    pieces = [b"abcdef", b"ghij"]
    got = consume(FakeRequest(pieces), lambda body: [body.read(4) for _ in range(4)])
    assert got == [b"abcd", b"ef", b"ghij", b""]


def test_a_declared_size_over_the_limit_is_refused_before_any_byte():
    with pytest.raises(UploadTooLarge, match="exceeds"):
        StreamedBody(FakeRequest([b"x"], declared=11), 10)  # type: ignore[arg-type]


def test_bytes_past_the_limit_fail_the_reader():
    with pytest.raises(UploadTooLarge):
        consume(FakeRequest([b"x" * 6, b"y" * 6]), read_all, max_bytes=10)


def test_a_body_short_of_its_content_length_fails_the_reader():
    with pytest.raises(TruncatedUpload, match="received 5 of 9"):
        consume(FakeRequest([b"12345"], declared=9), read_all)


def test_a_body_that_stops_arriving_fails_the_reader_as_stalled():
    request = FakeRequest([b"a" * KiB] * 3, idle=0.3, pause=2.0, pause_after=1)
    with pytest.raises(UploadStalled, match=r"nothing received for 0\.3 s"):
        consume(request, read_all)
    assert request.sent == 1


def test_a_reader_that_falls_behind_is_not_a_stalled_client(monkeypatch):
    """The event loop stops receiving once BUFFERED_BYTES wait for the reader; the time the
    reader takes is not counted against the client."""
    monkeypatch.setattr(deps, "BUFFERED_BYTES", 64 * KiB)
    pieces = [bytes([i]) * (16 * KiB) for i in range(32)]

    def slow_reader(body: StreamedBody) -> bytes:
        first = body.read(16 * KiB)
        time.sleep(0.8)  # well past the idle timeout, with the queue full
        return first + b"".join(read_all(body))

    got = consume(FakeRequest(pieces, idle=0.3), slow_reader)
    assert got == b"".join(pieces)


def test_a_reader_that_stops_early_does_not_hold_the_request():
    pieces = [b"z" * (64 * KiB)] * 200  # more than BUFFERED_BYTES: the feeder waits for room
    request = FakeRequest(pieces)
    assert consume(request, lambda body: body.read(10)) == b"z" * 10
    assert request.sent < len(pieces)
