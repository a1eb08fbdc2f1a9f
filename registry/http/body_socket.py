"""A large request body read from its connection by the thread that consumes it.

Through ASGI, every piece of an uploaded body is read by the event loop, copied out of
the HTTP parser (httptools, with the GIL held), queued and handed to the worker thread.
On the 2-vCPU host of issue 27 the event loop's thread held the GIL for half of a push's
GIL-held time (py-spy ``--gil``), while the chunking thread, which takes and drops the
GIL twice a chunk, waited for it. So for a body whose ``Content-Length`` is at least
``DIRECT_BODY_MIN_BYTES``, the server's protocol (``registry.http.server``) offers the
connection to the request (``BODY_SOCKET`` in the ASGI scope's extensions): once taken,
the event loop stops reading it, and the consuming thread reads the rest of the body
itself, a MiB at a time (``SO_RCVLOWAT``), each piece one ``recv`` into fresh ``bytes``.
A pushed GiB: 2.63 against 3.00 s median, 0.4 CPU-s less (6 alternated rounds).

The body's limits hold as on the event loop (``registry.http.pace``: the client's clock
runs only while the thread waits for bytes, as it stops there while the queue is full).
The connection closes after the answer: its parser never saw the body, so it cannot
carry another request. Under another server (Granian, the test client) there is no such
extension, and bodies come through ASGI as before.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, cast

from registry.errors import UploadAbandoned, UploadStalled
from registry.http.pace import BodyLimits, BodyPace

BODY_SOCKET = "carton.body_socket"
"""The ASGI scope extension: a callable that takes the request's body over (``TakenBody``),
or returns None when it cannot (the body arrived whole already, the connection is going)."""
PIECE_BYTES = 1024 * 1024
"""The most one read takes, and how much the socket holds before the thread is woken."""
DIRECT_BODY_MIN_BYTES = 8 * PIECE_BYTES
"""Smaller bodies come through ASGI: their connection stays open for the next request."""
AVAILABLE = hasattr(select, "poll") and hasattr(socket, "SO_RCVLOWAT")
"""Where the system has neither (not Linux, macOS or the BSDs), bodies come through ASGI."""
POLL_SECONDS = 0.25
"""The longest wait for bytes before the pace is checked again (and a close is seen)."""

BodyObserver = Callable[[int, bool], None]
"""Told of every piece of a taken body (its size) and, with True, of the body's end."""


@dataclass
class TakenBody:
    """What the protocol hands over: a duplicate of the connection's descriptor, the body
    bytes it had parsed and not handed on (they came in the same read as the headers),
    and how many it had handed on (``receive``) before."""

    fd: int
    head: bytes
    handed_on: int = 0
    observers: list[BodyObserver] = field(default_factory=list)


TakeBody = Callable[[], "TakenBody | None"]


def body_taker(scope: Mapping[str, Any]) -> TakeBody | None:
    """The request's ``BODY_SOCKET`` extension, if its server offers one."""
    extensions = scope.get("extensions")
    return cast("TakeBody | None", extensions.get(BODY_SOCKET) if extensions else None)


def offer_body(scope: MutableMapping[str, Any], take: TakeBody) -> None:
    """Put ``take`` in the scope's extensions, as ``body_taker`` reads it."""
    extensions = scope.get("extensions")
    scope["extensions"] = {**(extensions or {}), BODY_SOCKET: take}


class SocketBody:
    """The rest of a taken body, read on the consuming thread (module doc).

    ``read`` raises ``UploadAbandoned`` when the connection ends or fails first and
    ``UploadStalled`` when the body falls behind its pace; ``close`` may come from
    any thread (a reading thread closes the descriptor itself when it returns).
    """

    def __init__(self, taken: TakenBody, declared: int, limits: BodyLimits) -> None:
        self._sock = socket.socket(fileno=taken.fd)
        self._head = taken.head
        self._observers = taken.observers
        self._left = declared - taken.handed_on - len(taken.head)
        self.received = taken.handed_on + len(taken.head)
        now = time.monotonic()
        self._pace = BodyPace(limits, declared, now)
        self._pace.heard(self.received, now)
        self._pace.pause(now)  # the client's clock runs while the thread waits for bytes
        self._wait_ms = 1000 * min(limits.tick, POLL_SECONDS)
        self._lowat = 1
        self._poll = select.poll()
        self._poll.register(taken.fd, select.POLLIN)
        self._lock = threading.Lock()  # held while reading: the descriptor stays ours
        self._closed = False
        self._close_wanted = False
        if taken.head:
            self._tell(len(taken.head))

    def read(self) -> bytes:
        """The next piece of the body; b"" at its end."""
        if self._head:
            head, self._head = self._head, b""
            return head
        if self._left <= 0:
            self.close()
            return b""
        try:
            with self._lock:
                if self._closed or self._close_wanted:
                    raise UploadAbandoned("the request ended before its body was read")
                self._pace.resume(time.monotonic())
                try:
                    return self._receive()
                finally:
                    self._pace.pause(time.monotonic())
        finally:
            if self._close_wanted:
                self.close()

    def _receive(self) -> bytes:
        checked = time.monotonic()
        while True:
            want = min(self._left, PIECE_BYTES)
            if want != self._lowat:
                with contextlib.suppress(OSError):  # a wake-up per arrival then: slower, right
                    self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, want)
                self._lowat = want
            self._poll.poll(self._wait_ms)
            try:
                data = self._sock.recv(want)  # also after a timeout: a slow client's bytes count
            except BlockingIOError:
                data = None
            except OSError as exc:
                raise UploadAbandoned(
                    f"the connection failed before the body was received ({exc.strerror})"
                ) from None
            if data == b"":
                raise UploadAbandoned(
                    "the client closed the connection before its body was received"
                )
            now = time.monotonic()
            if data:
                self._pace.heard(len(data), now)
                self._left -= len(data)
                self.received += len(data)
                self._tell(len(data))
            if not data or now - checked >= self._wait_ms / 1000:
                checked = now
                if (reason := self._pace.check(now)) is not None:
                    raise UploadStalled(reason)
            if self._close_wanted:
                raise UploadAbandoned("the request ended before its body was read")
            if data:
                return data

    def _tell(self, size: int) -> None:
        whole = self._left <= 0
        for observe in self._observers:
            observe(size, whole)

    def close(self) -> None:
        """Give the duplicate descriptor up (the connection itself is the server's)."""
        if not self._lock.acquire(blocking=False):
            self._close_wanted = True  # the reading thread closes it as it returns
            return
        try:
            if not self._closed:
                self._closed = True
                if self._lowat != 1:  # the socket is shared with the server's descriptor
                    with contextlib.suppress(OSError):
                        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)
                self._sock.close()
        finally:
            self._lock.release()
