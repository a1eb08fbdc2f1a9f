"""Fetch a file named in a carton's LINKS: allow-listed hosts only, every hop checked.

An allow-list entry is a host as it appears in the URL (``example.org``,
``127.0.0.1``, ``host:port``), matched exactly. ``*`` admits any host whose
addresses are all public: loopback, private, link-local, unspecified,
multicast, reserved and other special addresses (also when embedded in
IPv4-mapped, NAT64 or 6to4 IPv6 addresses) must be listed by name.

Addresses are checked after DNS resolution, on every redirect hop, and the
connection is **pinned** to the checked addresses: ``make_client`` installs a
network backend that connects a host only to the addresses its last check
resolved (TLS still verifies the certificate against the host name, which is
what SNI carries), and refuses to connect to any host that was not checked.
So DNS rebinding between the check and the connection gets nowhere.

Residual risks: a host allowed *by name* is trusted wholesale (it is neither
resolved nor pinned: the operator vouched for it, including whatever it
resolves to); and an allowed public server can still answer with anything
(the bytes are verified against the LINKS sha256, never trusted).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx

from registry.carton.streams import CHUNK

MAX_REDIRECTS = 5

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class LinkRefused(Exception):
    """This URL did not give the file (refused, unresolvable, bad answer, too large)."""


class LinkNotAllowed(LinkRefused):
    """The policy forbids this URL: host not allowed, special address, bad scheme."""


@dataclass(frozen=True)
class LinkPolicy:
    allow: tuple[str, ...]
    timeout: float = 30.0

    def check(self, url: str) -> list[Address] | None:
        """Raise ``LinkNotAllowed`` (or ``LinkRefused`` if unresolvable) unless ``url`` may be
        fetched.

        Returns the checked addresses to pin the connection to, or None for a
        host allowed by name (trusted, connected as usual).
        """
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise LinkNotAllowed(f"scheme {parts.scheme!r} is not http(s)")
        try:
            host = parts.hostname
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            raise LinkNotAllowed(f"invalid URL {url!r}: {exc}") from exc
        if not host:
            raise LinkNotAllowed("URL has no host")
        netloc_host = parts.netloc.rsplit("@", 1)[-1]
        if host in self.allow or netloc_host in self.allow:
            return None
        if "*" not in self.allow:
            raise LinkNotAllowed(
                f"host {netloc_host!r} is not in REGISTRY_LINK_FETCH_ALLOW"
                f" ({', '.join(self.allow) or 'empty'})"
            )
        addresses = _resolve(host, port)
        if not addresses:
            raise LinkNotAllowed(f"host {host!r} resolves to no address")
        for address in addresses:
            if not is_public(address):
                raise LinkNotAllowed(
                    f"host {host!r} resolves to non-public address {address}; "
                    "list it in REGISTRY_LINK_FETCH_ALLOW to allow it"
                )
        return addresses


def is_public(address: Address) -> bool:
    """Globally routable unicast, also for IPv4 embedded in IPv6 (mapped, NAT64, 6to4)."""
    if address.is_multicast or not address.is_global:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        embedded: Address | None = address.ipv4_mapped or address.sixtofour
        if embedded is None and address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address.teredo is not None:
            return False
        if embedded is not None:
            return is_public(embedded)
    return True


def _resolve(host: str, port: int) -> list[Address]:
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise LinkRefused(f"cannot resolve {host!r}: {exc}") from exc
    found: list[Address] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


class PinnedBackend(httpcore.SyncBackend):
    """Connects a host only to the addresses its last ``LinkPolicy.check`` approved.

    Hosts allowed by name connect normally; any other host is refused before a
    socket is opened.
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._pins: dict[tuple[str, int], list[str]] = {}
        self._trusted: set[tuple[str, int]] = set()

    def pin(self, url: str, addresses: list[Address] | None) -> None:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        port = parts.port or (443 if parts.scheme == "https" else 80)
        with self._lock:
            if addresses is None:
                self._trusted.add((host, port))
                self._pins.pop((host, port), None)
            else:
                self._pins[(host, port)] = [str(a) for a in addresses]
                self._trusted.discard((host, port))

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        key = (host.lower().strip("[]"), port)
        with self._lock:
            trusted = key in self._trusted
            pinned = list(self._pins.get(key, ()))
        if trusted:
            return super().connect_tcp(host, port, timeout, local_address, socket_options)
        if not pinned:
            raise httpcore.ConnectError(f"refusing to connect to unchecked host {host}:{port}")
        error: Exception | None = None
        for address in pinned:
            try:
                return super().connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                error = exc
        assert error is not None
        raise error


def iter_link(
    client: httpx.Client, url: str, policy: LinkPolicy, max_bytes: int
) -> Iterator[bytes]:
    """Yield the decoded body of ``url`` (Content-Encoding undone), following checked redirects."""
    pins: PinnedBackend | None = getattr(client, "link_pins", None)
    for _ in range(MAX_REDIRECTS + 1):
        addresses = policy.check(url)
        if pins is not None:
            pins.pin(url, addresses)
        with client.stream(
            "GET", url, headers={"Accept-Encoding": "zstd, br, gzip, deflate, identity"}
        ) as response:
            if response.is_redirect:
                location = response.headers.get("location")
                if not location:
                    raise LinkRefused(f"redirect without Location from {url}")
                url = urljoin(url, location)
                continue
            if response.status_code != 200:
                raise LinkRefused(f"GET {url} answered {response.status_code}")
            total = 0
            for chunk in response.iter_bytes(CHUNK):
                total += len(chunk)
                if total > max_bytes:
                    raise LinkRefused(f"GET {url} is larger than the {max_bytes}-byte limit")
                yield chunk
            return
    raise LinkRefused(f"more than {MAX_REDIRECTS} redirects from {url}")


class LinkClient(httpx.Client):
    """An httpx client whose connections go only where ``link_pins`` allows."""

    link_pins: PinnedBackend


def make_client(policy: LinkPolicy) -> httpx.Client:
    """A client that follows no redirect by itself and connects only to checked addresses."""
    transport = httpx.HTTPTransport(trust_env=False)
    backend = PinnedBackend()
    pool = transport._pool
    if not hasattr(pool, "_network_backend"):  # pragma: no cover - httpcore internals moved
        raise RuntimeError("cannot pin LINKS connections with this httpcore version")
    pool._network_backend = backend
    client = LinkClient(
        follow_redirects=False,
        timeout=httpx.Timeout(policy.timeout),
        trust_env=False,
        transport=transport,
    )
    client.link_pins = backend
    return client


def describe_failures(failures: Sequence[tuple[str, str]]) -> str:
    return "; ".join(f"{url}: {why}" for url, why in failures)
