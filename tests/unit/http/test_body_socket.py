"""SocketBody: the rest of a large body read from its connection by the consuming thread
(registry.http.body_socket), over a real TCP connection on 127.0.0.1: pieces, limits,
the end of the body and of the connection, and a close from another thread."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from registry.errors import UploadAbandoned, UploadStalled
from registry.http.body_socket import PIECE_BYTES, SocketBody, TakenBody
from registry.http.pace import BodyLimits

LIMITS = BodyLimits(idle=5.0, min_rate=0, window=60.0, average_rate=0)


@pytest.fixture
def connection() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(client, server) ends of one TCP connection; the server end non-blocking, as a
    server's event loop keeps it."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    server.setblocking(False)
    with client, server:
        yield client, server


def taken(server: socket.socket, head: bytes = b"") -> TakenBody:
    return TakenBody(os.dup(server.fileno()), head)


def read_all(body: SocketBody) -> list[bytes]:
    pieces = []
    while piece := body.read():
        pieces.append(piece)
    return pieces


def fd_is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_the_head_comes_first_then_the_rest_in_pieces_of_a_mib_at_most(connection):
    client, server = connection
    head, rest = b"h" * 1000, os.urandom(3 * PIECE_BYTES + 12345)
    sizes: list[tuple[int, bool]] = []
    given = taken(server, head)
    given.observers.append(lambda size, whole: sizes.append((size, whole)))
    body = SocketBody(given, len(head) + len(rest), LIMITS)
    sender = threading.Thread(target=client.sendall, args=(rest,))
    sender.start()
    pieces = read_all(body)
    sender.join()
    assert pieces[0] == head
    assert b"".join(pieces[1:]) == rest
    assert all(len(p) <= PIECE_BYTES for p in pieces)
    assert body.received == len(head) + len(rest)
    assert sum(size for size, _ in sizes) == body.received
    assert [whole for _, whole in sizes] == [False] * (len(sizes) - 1) + [True]
    assert not fd_is_open(given.fd)  # given up at the body's end; the connection is not
    server.getsockname()


def test_bytes_after_the_body_are_left_on_the_connection(connection):
    client, server = connection
    client.sendall(b"abcdefNEXT")
    body = SocketBody(taken(server), 6, LIMITS)
    assert b"".join(read_all(body)) == b"abcdef"
    server.setblocking(True)
    assert server.recv(4) == b"NEXT"


def test_a_connection_that_ends_before_the_body_is_an_abandoned_upload(connection):
    client, server = connection
    client.sendall(b"x" * 1000)
    client.shutdown(socket.SHUT_WR)
    body = SocketBody(taken(server), 5000, LIMITS)
    assert body.read() == b"x" * 1000
    with pytest.raises(UploadAbandoned, match="closed the connection"):
        body.read()


def test_a_body_that_stops_arriving_is_stalled_after_its_idle_timeout(connection):
    client, server = connection
    client.sendall(b"x" * 10)
    limits = BodyLimits(idle=0.3, min_rate=0, window=60.0, average_rate=0)
    body = SocketBody(taken(server), 100, limits)
    assert body.read() == b"x" * 10
    started = time.monotonic()
    with pytest.raises(UploadStalled, match="stalled"):
        body.read()
    assert 0.3 <= time.monotonic() - started < 5


def test_time_the_reader_spends_elsewhere_is_not_the_clients(connection):
    client, server = connection
    limits = BodyLimits(idle=0.3, min_rate=0, window=60.0, average_rate=0)
    client.sendall(b"x" * 10)
    body = SocketBody(taken(server), 20, limits)
    assert body.read() == b"x" * 10
    time.sleep(0.6)  # the consumer is busy: the client's clock stands still
    client.sendall(b"y" * 10)
    assert body.read() == b"y" * 10


def test_a_trickle_under_the_minimum_rate_is_cut_before_its_idle_timeout(connection):
    client, server = connection
    limits = BodyLimits(idle=5.0, min_rate=10_000, window=0.5, average_rate=0)
    body = SocketBody(taken(server), 1_000_000, limits)
    stop = threading.Event()

    def trickle() -> None:
        while not stop.wait(0.05):
            client.sendall(b"t" * 10)

    sender = threading.Thread(target=trickle)
    sender.start()
    started = time.monotonic()
    try:
        with pytest.raises(UploadStalled, match="too slow"):
            read_all(body)
    finally:
        stop.set()
        sender.join()
    assert time.monotonic() - started < 4


def test_a_close_from_another_thread_ends_a_waiting_read(connection):
    _client, server = connection
    given = taken(server)
    body = SocketBody(given, 100, LIMITS)
    failures: list[BaseException] = []

    def read() -> None:
        try:
            body.read()
        except BaseException as exc:
            failures.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.1)  # waiting for bytes that do not come
    body.close()
    reader.join(timeout=5)
    assert not reader.is_alive()
    assert [type(f) for f in failures] == [UploadAbandoned]
    assert not fd_is_open(given.fd)
    with pytest.raises(UploadAbandoned):
        body.read()
