"""The uvicorn server the registry runs under, with its slow-client timeouts.

uvicorn closes idle keep-alive connections (``REGISTRY_KEEP_ALIVE_TIMEOUT``) but has no
limit on how long a request's headers may take: a client that connects and trickles a
header line a minute holds its connection forever. ``HeaderTimeoutProtocol`` closes a
connection whose request line and headers are not complete within
``REGISTRY_HEADER_TIMEOUT`` of the connection opening (or of the next request starting,
on a kept-alive connection). Stalled *bodies* are the request reader's business
(``registry.http.deps.body_chunks``).

The same class hands request bodies on without copying them (``on_body``), and hands a
large body's connection over to the request that reads it (``BODY_SOCKET``,
``registry.http.body_socket``); ``LargeReads`` has the event loop read a connection a MiB
at a time (``RECEIVE_BUFFER_BYTES``).
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from typing import Any, cast

from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from registry.http.body_socket import TakenBody, offer_body
from registry.settings import Settings


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol, closing connections whose headers stall.

    ``header_timeout`` None: ``REGISTRY_HEADER_TIMEOUT``, read once per process (worker
    processes get the class by name, so it cannot carry the value itself).
    """

    header_timeout: float | None = None
    _from_env: float | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_taken = False
        self._body_parsed = 0  # bytes of the current request's body the parser handed on
        if self.header_timeout is None:
            if HeaderTimeoutProtocol._from_env is None:
                HeaderTimeoutProtocol._from_env = Settings.from_env().header_timeout
            self.header_timeout = HeaderTimeoutProtocol._from_env

    @classmethod
    def with_timeout(cls, seconds: float) -> type[HeaderTimeoutProtocol]:
        return type(cls.__name__, (cls,), {"header_timeout": seconds})

    def _arm_header_timer(self) -> None:
        if self._header_timer is None:
            assert self.header_timeout is not None
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_stalled)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_stalled(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(  # type: ignore[override]  # uvicorn's signature (asyncio's is wider)
        self, transport: asyncio.Transport
    ) -> None:
        super().connection_made(transport)
        self._arm_header_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_header_timer()
        self._body_parsed = 0

    def on_headers_complete(self) -> None:
        self._disarm_header_timer()
        super().on_headers_complete()
        cycle: Any = self.cycle  # this request's, unless it is an upgrade
        if cycle is not None and cycle.scope is self.scope:
            take = functools.partial(self._take_body, cycle)
            offer_body(cast("dict[str, Any]", self.scope), take)

    def _take_body(self, cycle: Any) -> TakenBody | None:
        """The connection, for the request of ``cycle`` to read the rest of its body from
        (``registry.http.body_socket``); None when its body is no longer the parser's to
        read. On the event loop, before the request's first ``receive``."""
        if (
            cycle is not self.cycle
            or self._body_taken
            or not cycle.more_body
            or cycle.response_complete
            or cycle.disconnected
            or self.transport.is_closing()
        ):
            return None
        sock = self.transport.get_extra_info("socket")
        try:
            fd = os.dup(sock.fileno())
        except (AttributeError, OSError, ValueError):
            return None
        if cycle.waiting_for_100_continue:  # as uvicorn's first receive would
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            cycle.waiting_for_100_continue = False
        self.flow.pause_reading()
        self._body_taken = True
        head = bytes(cycle.body)
        cycle.body = bytearray()
        cycle.keep_alive = False  # the parser is left inside the body: no next request
        return TakenBody(fd, head, self._body_parsed - len(head))

    def data_received(self, data: bytes) -> None:
        if self._body_taken:  # the body's bytes are the request's to read, never the parser's
            self.flow.pause_reading()
            return
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def on_body(self, body: bytes) -> None:
        """A piece that arrives while none waits for the app: handed on as it is.

        uvicorn appends every piece to a bytearray and gives the app ``bytes()`` of it:
        two copies of each uploaded byte on the event loop, a third of what receiving
        costs. ``receive`` passes a bytes buffer on as is (``bytes(b) is b``); pieces
        that arrive while one waits are uvicorn's to join, as before.
        """
        self._body_parsed += len(body)
        cycle = self.cycle
        pending: bytes | bytearray = cycle.body  # bytes: a piece the line below handed on
        if pending or cycle.response_complete or self.parser.should_upgrade():
            if isinstance(pending, bytes):
                cycle.body = bytearray(pending)
            super().on_body(body)
            return
        cycle.body = body  # type: ignore[assignment]  # uvicorn says bytearray: see docstring
        if len(body) > HIGH_WATER_LIMIT:
            self.flow.pause_reading()
        cycle.message_event.set()


RECEIVE_BUFFER_BYTES = 1024 * 1024
"""The most one read of a connection takes from its socket (uvloop's own reads: 250 KB).
A pushed GiB then reaches the app in about 1,000 pieces instead of 4,000, and every
thread a push hands them through wakes a quarter as often (issue 27: 2.44-2.86 ->
2.21-2.52 s a GiB, 0.3 CPU-second less, alternated; 256 KiB gained nothing, 4 MiB no
more than 1 MiB)."""


class _ReceiveBuffer(threading.local):
    """One buffer per event loop (a loop runs in one thread): a read fills it, the protocol
    parses it at once (httptools copies out what it keeps), and the next read reuses it."""

    def __init__(self) -> None:
        self.view = memoryview(bytearray(RECEIVE_BUFFER_BYTES))


_RECEIVE = _ReceiveBuffer()


class LargeReads(asyncio.BufferedProtocol):
    """uvicorn's protocol (``inner``) fed by reads into ``RECEIVE_BUFFER_BYTES``.

    uvloop and asyncio read into the buffer a ``BufferedProtocol`` lends them, as much as
    fits; uvloop takes that path only for a protocol that is no ``asyncio.Protocol``,
    which uvicorn's is, so this one wraps it and hands it each read as a memoryview
    (httptools parses any buffer, and its callbacks get bytes of their own). A protocol
    that replaces this one on the transport (a WebSocket upgrade) is read as usual.
    """

    def __init__(self, inner: type[HttpToolsProtocol], **kwargs: Any) -> None:
        self.inner = inner(**kwargs)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.inner.connection_made(transport)  # type: ignore[arg-type]  # a Transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.inner.connection_lost(exc)

    def eof_received(self) -> None:  # the transport then closes (as for uvicorn's protocol)
        self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def get_buffer(self, sizehint: int) -> memoryview:
        return _RECEIVE.view

    def buffer_updated(self, nbytes: int) -> None:
        self.inner.data_received(_RECEIVE.view[:nbytes])  # type: ignore[arg-type]  # any buffer


def server_options(settings: Settings, *, in_process: bool = True) -> dict[str, Any]:
    """The connection timeouts and large reads, as ``uvicorn.run`` / ``uvicorn.Config``
    keyword arguments.

    ``in_process`` False: for worker processes, which take the protocol class by name
    and read ``REGISTRY_HEADER_TIMEOUT`` themselves.
    """
    protocol = (
        HeaderTimeoutProtocol.with_timeout(settings.header_timeout)
        if in_process
        else HeaderTimeoutProtocol
    )
    return {
        "http": functools.partial(LargeReads, protocol),
        "timeout_keep_alive": max(1, round(settings.keep_alive_timeout)),
    }
