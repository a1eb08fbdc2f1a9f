"""Signed, expiring blob URLs for the LINKS of private models' slim cartons.

The carton loader sends no token, so a slim carton of a model in a private namespace
names its linked files as ``{PUBLIC_URL}/blobs/{sha256}?expires=<unix>&sig=<hex>``:
an HMAC-SHA256, with the registry's secret, over the sha256 and the expiry.
``HEAD``/``GET /blobs/{sha256}`` with a valid, unexpired signature need no token; an
altered or expired one is a 404 (DESIGN.md "Namespaces").

The expiry is rounded down to a step (an eighth of the lifetime, at most an hour) before
the lifetime is added, so a carton rebuilt within one step has the same bytes and ETag
and caches keep working; every URL handed out lives at least ``lifetime - step``.

The secret is ``REGISTRY_SECRET_KEY``, else a random key generated once into
``<data dir>/secret_key`` (readable by the registry's user alone). Servers that share
one database must share the key: set it, or share the data dir.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
import time
from pathlib import Path

from registry.blobstore import BlobNotFound
from registry.settings import Settings

SECRET_FILE = "secret_key"
MAX_STEP_SECONDS = 3600

_keys: dict[Path, bytes] = {}
_keys_lock = threading.Lock()


def secret_key(settings: Settings) -> bytes:
    """The signing key: the setting, else the one generated into the data dir."""
    if settings.secret_key:
        return settings.secret_key.encode("utf-8")
    path = (settings.data_dir / SECRET_FILE).resolve()
    with _keys_lock:
        key = _keys.get(path)
        if key is None:
            key = _load_or_create(path)
            _keys[path] = key
        return key


def _load_or_create(path: Path) -> bytes:
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_hex(32).encode()
    try:  # O_EXCL: two processes starting at once agree on the first key written
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes().strip()
    with os.fdopen(fd, "wb") as f:
        f.write(value + b"\n")
    return value


def signature(key: bytes, sha256: str, expires: int) -> str:
    return hmac.new(key, f"{sha256}\n{expires}".encode(), hashlib.sha256).hexdigest()


def link_expiry(settings: Settings, now: float | None = None) -> int:
    """The expiry that URLs signed now carry (stable within one step; module docstring)."""
    ttl = max(int(settings.signed_url_ttl), 1)
    step = max(1, min(MAX_STEP_SECONDS, ttl // 8))
    now = time.time() if now is None else now
    return int(now) // step * step + ttl


def signed_query(settings: Settings, sha256: str, expires: int) -> str:
    return f"expires={expires}&sig={signature(secret_key(settings), sha256, expires)}"


def valid_signature(settings: Settings, sha256: str, expires: str, sig: str) -> bool:
    """The URL's signature is the registry's and has not expired."""
    if not (expires.isascii() and expires.isdigit() and len(expires) <= 12):
        return False
    if int(expires) < time.time():
        return False
    expected = signature(secret_key(settings), sha256, int(expires))
    return hmac.compare_digest(expected, sig)


def require_valid_signature(settings: Settings, sha256: str, expires: str, sig: str) -> None:
    """``BlobNotFound`` (as for a blob never stored) unless the signature is valid."""
    if not valid_signature(settings, sha256, expires, sig):
        raise BlobNotFound(sha256)
