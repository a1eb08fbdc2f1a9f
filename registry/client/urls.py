"""Registry URLs: the default one, and whether a URL can name a registry at all."""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

from registry.client.errors import ClientError

DEFAULT_PORT = 8080
"""``registry.settings.DEFAULT_PORT``, the port ``serve`` listens on (a test keeps them equal):
importing the settings module cost a push 4 ms of its start, for one number."""
DEFAULT_URL = f"http://127.0.0.1:{DEFAULT_PORT}"


def default_url() -> str:
    return os.environ.get("REGISTRY_URL") or DEFAULT_URL


# API paths a registry URL must not end in: the client adds them (a prefix before them is fine).
_API_PATH = re.compile(r"/(api/v1|v2|cartons|blobs|models)(/.*)?$")


def check_registry_url(url: str) -> str:
    """``url`` if it can name a registry (http or https, a host, a valid port), else ClientError."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError for a port that is not a number in range
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # also a broken [IPv6] host
        valid = False
    if not valid:
        raise ClientError(
            f"invalid registry URL {url!r}: expected http://HOST[:PORT] or https://HOST "
            "(from --url or REGISTRY_URL)"
        )
    api = _API_PATH.search(parts.path)
    if api is not None:
        root = url[: url.index(parts.path) + api.start()] or url
        raise ClientError(
            f"invalid registry URL {url!r}: the registry is at its root, {root} "
            f"(the client adds {api.group(0).rstrip('/')}/... itself)"
        )
    return url
