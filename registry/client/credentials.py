"""Tokens saved by ``carton-registry login``: one per registry URL, in a file only its owner reads.

The file is ``carton-registry/credentials.json`` in the platform's config folder:
``$XDG_CONFIG_HOME`` when set, else ``~/Library/Application Support`` on macOS,
``%APPDATA%`` on Windows and ``~/.config`` elsewhere. It is written whole to a temp
file of mode 0600 and renamed over the old one, so it is never readable by others
nor half-written. ``REGISTRY_TOKEN`` and ``--token`` win over it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from registry.client.errors import ClientError

APP_DIR = "carton-registry"
FILE_NAME = "credentials.json"


def config_dir() -> Path:
    """The folder user settings of command-line tools go in, on this platform."""
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg:
        return Path(xdg)
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support"
    if sys.platform == "win32" and os.environ.get("APPDATA"):
        return Path(os.environ["APPDATA"])
    return Path.home() / ".config"


def credentials_path() -> Path:
    return config_dir() / APP_DIR / FILE_NAME


def registry_key(url: str) -> str:
    """One spelling per registry: scheme and host lowercased, no default port, no final /."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    default_port = {"http": 80, "https": 443}.get(scheme)
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port in (None, default_port) else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def _load(path: Path) -> dict[str, dict[str, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(text)
        registries = data["registries"]
        if not isinstance(registries, dict):
            raise TypeError("registries is not an object")
    except (ValueError, KeyError, TypeError) as exc:
        raise ClientError(
            f"credentials file {path} is damaged ({exc}); delete it and log in again"
        ) from exc
    return registries


def _save(path: Path, registries: dict[str, dict[str, str]]) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"registries": registries}, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def stored_token(url: str) -> str | None:
    """The token ``login`` saved for this registry, if any."""
    entry = _load(credentials_path()).get(registry_key(url))
    token = entry.get("token") if isinstance(entry, dict) else None
    return token if isinstance(token, str) and token else None


def store_token(url: str, token: str) -> Path:
    """Save ``token`` for this registry (replacing any other); the file's path."""
    path = credentials_path()
    registries = _load(path)
    registries[registry_key(url)] = {"token": token}
    _save(path, registries)
    return path


def forget_token(url: str) -> bool:
    """Remove this registry's token; whether there was one."""
    path = credentials_path()
    registries = _load(path)
    if registries.pop(registry_key(url), None) is None:
        return False
    _save(path, registries)
    return True
