"""The server's connections are read a MiB at a time (``registry.http.server.LargeReads``),
under uvloop (serve's loop) and asyncio's own loop: bodies arrive whole and in order,
in pieces larger than the loops' own reads, and requests sharing one read are each
answered."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from registry.http.body_socket import PIECE_BYTES, SocketBody, body_taker
from registry.http.pace import BodyLimits
from registry.http.server import RECEIVE_BUFFER_BYTES, LargeReads, server_options
from registry.settings import Settings

OWN_READS = 256 * 1024  # the most either loop reads at once by itself (uvloop: 256,000)


async def body_digest(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers each request with the sha256 of its body and its largest piece's size;
    waits a little before each piece so that the client's bytes pile up in the socket.
    With ``X-Take-Body: 1``, the body is taken from the connection and read in a thread
    (``registry.http.body_socket``), as a large upload's is; with ``2``, after one piece
    came through ``receive``."""
    if scope["type"] != "http":
        return
    digest, largest, more = hashlib.sha256(), 0, True
    take, headers = body_taker(scope), dict(scope["headers"])
    if take is not None and headers.get(b"x-take-body") in (b"1", b"2"):
        pieces = []
        if headers[b"x-take-body"] == b"2":
            pieces.append((await receive())["body"])
        taken = take()
        assert taken is not None
        length = int(headers[b"content-length"])
        body = SocketBody(taken, length, BodyLimits(5.0, 0, 60.0, 0))
        pieces += await asyncio.to_thread(lambda: list(iter(body.read, b"")))
        for piece in pieces:
            digest.update(piece)
        largest, more = max(map(len, pieces)), False
    while more:
        await asyncio.sleep(0.002)
        message = await receive()
        body = message.get("body", b"")
        digest.update(body)
        largest = max(largest, len(body))
        more = message.get("more_body", False)
    answer = f"{digest.hexdigest()} {largest}".encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", b"%d" % len(answer))],
        }
    )
    await send({"type": "http.response.body", "body": answer})


@pytest.fixture(params=["uvloop", "asyncio"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[int, list[LargeReads]]]:
    """A uvicorn server with the registry's options on ``loop``; (port, its protocols)."""
    made: list[LargeReads] = []
    options = server_options(Settings.from_env())
    factory = options.pop("http")

    def protocol(**kwargs: Any) -> LargeReads:
        made.append(factory(**kwargs))
        return made[-1]

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        body_digest,
        loop=request.param,
        log_level="warning",
        lifespan="off",
        http=protocol,
        **options,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield sock.getsockname()[1], made
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def exchange(port: int, request: bytes, answers: int) -> list[bytes]:
    """Send ``request`` (one or more requests) at once; the bodies of ``answers`` responses."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        sender = threading.Thread(target=conn.sendall, args=(request,))
        sender.start()
        received, bodies = b"", []
        while len(bodies) < answers:
            chunk = conn.recv(65536)
            assert chunk, f"connection closed after {len(bodies)} of {answers} answers"
            received += chunk
            while b"\r\n\r\n" in received:
                head, _, rest = received.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                if len(rest) < length:
                    break
                assert head.startswith(b"HTTP/1.1 200"), head
                bodies.append(rest[:length])
                received = rest[length:]
        sender.join()
    return bodies


def post(body: bytes) -> bytes:
    return b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body


def test_a_large_body_arrives_whole_in_reads_larger_than_the_loops_own(server) -> None:
    port, protocols = server
    body = os.urandom(64 * 1024 * 1024)
    [answer] = exchange(port, post(body), 1)
    digest, largest = answer.split()
    assert digest.decode() == hashlib.sha256(body).hexdigest()
    assert OWN_READS < int(largest) <= RECEIVE_BUFFER_BYTES
    assert [type(p) for p in protocols] == [LargeReads]


@pytest.mark.parametrize("take", [b"1", b"2"], ids=["at-once", "after-a-receive"])
def test_a_body_taken_from_its_connection_arrives_whole_and_the_connection_closes(
    server, take: bytes
) -> None:
    port, _ = server
    body = os.urandom(16 * 1024 * 1024)
    request = b"POST / HTTP/1.1\r\nHost: x\r\nX-Take-Body: " + take
    request += b"\r\nContent-Length: %d\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        sender = threading.Thread(target=conn.sendall, args=(request % len(body) + body,))
        sender.start()
        received = b""
        while chunk := conn.recv(65536):  # to the end: the server closes the connection
            received += chunk
        sender.join()
    head, _, answer = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"connection: close" in head.lower(), head
    digest, largest = answer.split()
    assert digest.decode() == hashlib.sha256(body).hexdigest()
    assert 0 < int(largest) <= PIECE_BYTES


def test_requests_that_share_a_read_are_each_answered(server) -> None:
    port, _ = server
    bodies = [os.urandom(n) for n in (0, 1, 1000, 300_000, 5)]
    answers = exchange(port, b"".join(post(b) for b in bodies), len(bodies))
    assert [a.split()[0].decode() for a in answers] == [
        hashlib.sha256(b).hexdigest() for b in bodies
    ]
