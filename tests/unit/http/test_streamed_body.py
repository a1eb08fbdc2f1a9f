"""StreamedBody: a request body fed from the event loop to the worker thread reading it,
with its limits (size, Content-Length, stalls) surfacing in the reader."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import anyio
import anyio.to_thread
import pytest

from registry.errors import TruncatedUpload, UploadAbandoned, UploadStalled, UploadTooLarge
from registry.http import deps
from registry.http.deps import StreamedBody

KiB = 1024


class FakeRequest:
    """What StreamedBody uses of a Litestar request: headers, the body settings, receive()."""

    def __init__(
        self,
        pieces: list[bytes],
        *,
        declared: int | None = None,
        idle: float = 5.0,
        pause: float = 0.0,
        pause_after: int = 0,
        interval: float = 0.0,
        disconnect: bool = False,
        min_rate: int = 0,
        window: float = 60.0,
        average_rate: int = 0,
    ) -> None:
        self.pieces = pieces
        self.headers = {} if declared is None else {"content-length": str(declared)}
        settings = SimpleNamespace(
            body_idle_timeout=idle,
            body_min_rate=min_rate,
            body_rate_window=window,
            body_deadline_rate=average_rate,
        )
        self.app = SimpleNamespace(state=SimpleNamespace(ctx=SimpleNamespace(settings=settings)))
        self.pause, self.pause_after, self.interval = pause, pause_after, interval
        self.disconnect = disconnect  # the client goes away after its pieces
        self.sent = 0

    async def receive(self) -> dict[str, Any]:
        i = self.sent
        if i == len(self.pieces):
            if self.disconnect:
                return {"type": "http.disconnect"}
            return {"type": "http.request", "body": b"", "more_body": False}
        if self.pause and i == self.pause_after:
            await anyio.sleep(self.pause)
        if self.interval:
            await anyio.sleep(self.interval)
        self.sent += 1
        more = self.disconnect or self.sent < len(self.pieces)
        return {"type": "http.request", "body": self.pieces[i], "more_body": more}


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


def test_a_body_trickling_under_the_minimum_rate_is_cut_before_its_idle_timeout():
    """A byte every 50 ms never trips a 5 s idle timeout; 20 bytes/s is under 1 KiB/s."""
    request = FakeRequest([b"x"] * 1000, interval=0.05, min_rate=KiB, window=0.5)
    started = time.monotonic()
    with pytest.raises(UploadStalled, match="REGISTRY_BODY_MIN_RATE"):
        consume(request, read_all)
    assert request.sent < 100 and time.monotonic() - started < 5


def test_a_body_over_the_minimum_rate_arrives_whole():
    pieces = [b"y" * (4 * KiB)] * 20  # 4 KiB every 20 ms: 200 KiB/s against 1 KiB/s
    request = FakeRequest(pieces, interval=0.02, min_rate=KiB, window=0.1, average_rate=KiB)
    assert b"".join(consume(request, read_all)) == b"".join(pieces)


def test_a_body_behind_its_average_rate_is_cut_at_its_deadline():
    """Fast enough for the window (2 KiB/s over 0.2 s), too slow for the average (8 KiB/s)
    that a 64 KiB body announced must keep: cut well before it could have ended."""
    pieces = [b"z" * 100] * 655 + [b"z" * 36]
    request = FakeRequest(
        pieces, declared=64 * KiB, interval=0.02, min_rate=2 * KiB, window=0.2, average_rate=8 * KiB
    )
    with pytest.raises(UploadStalled, match="REGISTRY_BODY_DEADLINE_RATE"):
        consume(request, read_all)
    assert request.sent < len(pieces) // 2


def test_a_reader_that_falls_behind_does_not_make_the_client_too_slow(monkeypatch):
    monkeypatch.setattr(deps, "BUFFERED_BYTES", 64 * KiB)
    pieces = [bytes([i]) * (16 * KiB) for i in range(32)]

    def slow_reader(body: StreamedBody) -> bytes:
        first = body.read(16 * KiB)
        time.sleep(0.8)  # with the queue full: four windows without a byte received
        return first + b"".join(read_all(body))

    request = FakeRequest(pieces, min_rate=64 * KiB, window=0.2, average_rate=64 * KiB)
    assert consume(request, slow_reader) == b"".join(pieces)


def test_a_client_that_goes_away_mid_body_is_a_client_abort_not_a_server_error():
    request = FakeRequest([b"a" * KiB] * 3, declared=10 * KiB, disconnect=True)
    with pytest.raises(UploadAbandoned, match="closed the connection"):
        consume(request, read_all)


def test_read_body_counts_a_disconnect_and_a_trickle_too():
    async def read(request: FakeRequest) -> bytes:
        return bytes(await deps.read_body(request, 1 << 20))  # type: ignore[arg-type]

    with pytest.raises(UploadAbandoned):
        anyio.run(read, FakeRequest([b"a"] * 3, disconnect=True))
    with pytest.raises(UploadStalled, match="too slow"):
        anyio.run(read, FakeRequest([b"x"] * 1000, interval=0.05, min_rate=KiB, window=0.3))
    assert anyio.run(read, FakeRequest([b"ab", b"cd"])) == b"abcd"
