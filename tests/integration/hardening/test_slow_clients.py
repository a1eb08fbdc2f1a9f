"""Slow clients (issue 12), against a real server on 127.0.0.1 on every backend pair:
connections whose headers or upload bodies stall are closed, keep-alive idles end, and
the registry keeps answering other clients meanwhile."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest

from tests.helpers import make_carton, sha

TRICKLERS = 40  # per kind: headers, push bodies, blob bodies
TIMEOUT = 1.0  # header, body-idle and keep-alive timeouts of the server under test
SLACK = 4.0  # how much later than its timeout a connection may close on a busy machine


def connect(live_server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", live_server.port), timeout=TIMEOUT + SLACK + 5)
    return sock


def closed_by_server(sock: socket.socket) -> tuple[bool, bytes]:
    """Read until the server closes; (closed, what it sent). Trickles no more bytes."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except TimeoutError:
        return False, received
    except ConnectionResetError:
        pass
    return True, received


def trickle(sock: socket.socket, data: bytes, interval: float, stop: threading.Event) -> None:
    """Send ``data`` a byte at a time until it is sent, the server hangs up, or ``stop``."""
    for i in range(len(data)):
        if stop.wait(interval):
            return
        try:
            sock.sendall(data[i : i + 1])
        except OSError:
            return


@pytest.mark.settings(
    header_timeout=TIMEOUT,
    body_idle_timeout=TIMEOUT,
    keep_alive_timeout=TIMEOUT,
    ingest_queue_timeout=TIMEOUT,
)
def test_stalled_headers_and_bodies_are_cut_off(live_server):
    blob = b"x" * 1000
    carton = make_carton({"w.bin": b"w" * 1000}, model_name="slow")
    headers_forever = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"y" * 10_000
    stalled_uploads = [
        b"POST /api/v1/cartons HTTP/1.1\r\nHost: x\r\n"
        + f"Content-Length: {len(carton)}\r\n\r\n".encode()
        + carton[:100],
        b"PUT /api/v1/blobs/" + sha(blob).encode() + b" HTTP/1.1\r\nHost: x\r\n"
        b"Content-Length: 1000\r\n\r\n" + blob[:10],
    ]
    stop = threading.Event()
    sockets, threads = [], []
    started = time.monotonic()
    for _ in range(TRICKLERS):
        sock = connect(live_server)  # headers trickled a byte every 0.2 s: never complete
        thread = threading.Thread(target=trickle, args=(sock, headers_forever, 0.2, stop))
        thread.start()
        sockets.append(("headers", sock))
        threads.append(thread)
    for request in stalled_uploads:
        for _ in range(TRICKLERS // 2):
            sock = connect(live_server)
            sock.sendall(request)  # then nothing more
            sockets.append(("body", sock))
    idle = connect(live_server)  # a finished request on a kept-alive connection, then idle
    idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    sockets.append(("keep-alive", idle))
    try:
        # others are served meanwhile
        assert httpx.get(f"{live_server.url}/healthz", timeout=5).status_code == 200
        for kind, sock in sockets:
            closed, received = closed_by_server(sock)
            assert closed, f"{kind} connection still open after {time.monotonic() - started:.1f}s"
            if kind == "body" and received:
                # a stalled upload that got a slot: 408; one still queued for a slot: 503
                status = received.split(b" ", 2)[1]
                assert status in (b"408", b"503"), received[:200]
        assert time.monotonic() - started < 2 * TIMEOUT + SLACK  # the queue wait included
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        for _, sock in sockets:
            sock.close()
    assert httpx.get(f"{live_server.url}/healthz", timeout=5).status_code == 200
