"""Fetch a file named in a carton's LINKS: allow-listed hosts only, every hop checked.

An allow-list entry is a host as it appears in the URL (``example.org``,
``127.0.0.1``, ``host:port``), matched exactly. ``*`` admits any host whose
addresses are all public: loopback, private, link-local and other special
addresses must be listed by name. Addresses are re-checked after DNS
resolution and on every redirect.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx

MAX_REDIRECTS = 5


class LinkRefused(Exception):
    """This URL may not be fetched (host not allowed, special address, bad scheme)."""


@dataclass(frozen=True)
class LinkPolicy:
    allow: tuple[str, ...]
    timeout: float = 30.0

    def check(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise LinkRefused(f"scheme {parts.scheme!r} is not http(s)")
        host = parts.hostname
        if not host:
            raise LinkRefused("URL has no host")
        netloc_host = parts.netloc.rsplit("@", 1)[-1]
        if host in self.allow or netloc_host in self.allow:
            return
        if "*" not in self.allow:
            raise LinkRefused(
                f"host {netloc_host!r} is not in REGISTRY_LINK_FETCH_ALLOW"
                f" ({', '.join(self.allow) or 'empty'})"
            )
        for address in _resolve(host, parts.port or (443 if parts.scheme == "https" else 80)):
            if not address.is_global or address.is_multicast:
                raise LinkRefused(
                    f"host {host!r} resolves to non-public address {address}; "
                    "list it in REGISTRY_LINK_FETCH_ALLOW to allow it"
                )


def _resolve(host: str, port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise LinkRefused(f"cannot resolve {host!r}: {exc}") from exc
    return [ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos]


def iter_link(
    client: httpx.Client, url: str, policy: LinkPolicy, max_bytes: int
) -> Iterator[bytes]:
    """Yield the decoded body of ``url`` (Content-Encoding undone), following checked redirects."""
    for _ in range(MAX_REDIRECTS + 1):
        policy.check(url)
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
            for chunk in response.iter_bytes(1024 * 1024):
                total += len(chunk)
                if total > max_bytes:
                    raise LinkRefused(f"GET {url} is larger than the {max_bytes}-byte limit")
                yield chunk
            return
    raise LinkRefused(f"more than {MAX_REDIRECTS} redirects from {url}")


def make_client(policy: LinkPolicy) -> httpx.Client:
    return httpx.Client(
        follow_redirects=False, timeout=httpx.Timeout(policy.timeout), trust_env=False
    )


def describe_failures(failures: Sequence[tuple[str, str]]) -> str:
    return "; ".join(f"{url}: {why}" for url, why in failures)
