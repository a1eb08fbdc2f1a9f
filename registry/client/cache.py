"""What the client keeps between runs: chunks it has pulled, and cartons it has verified.

Both live under ``carton-registry/`` in the platform's cache folder:
``$XDG_CACHE_HOME`` when set, else ``~/Library/Caches`` on macOS,
``%LOCALAPPDATA%`` on Windows and ``~/.cache`` elsewhere. Nothing in it is
trusted: a chunk is checked against its BLAKE3 name whenever it is read (a bad
one is deleted and fetched again), and a carton counts as verified only while
its file is exactly the one that was hashed (same device, inode, size, mtime and
ctime). Deleting the folder loses nothing but time.

``ChunkCache`` is capped (``REGISTRY_CACHE_MAX_BYTES``, default 10 GiB): after a
transfer that added chunks (whether it succeeded or not), and every time a
transfer has added a quarter of the cap (at least 64 MiB), the least recently
used go until it fits (a read touches a chunk's mtime). A pull larger than the
cap therefore never holds much more than the cap on disk besides its output.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from registry.carton.streams import GiB, MiB
from registry.chunking import chunk_hash
from registry.client.errors import ClientError

APP_DIR = "carton-registry"
MAX_BYTES_ENV = "REGISTRY_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 10 * GiB
TRIM_EVERY_MIN = 64 * MiB
VERIFIED_KEPT = 256
"""Cartons remembered as verified; the oldest are forgotten first."""


CACHE_WHERE = (
    "carton-registry/chunks in the platform's cache folder ($XDG_CACHE_HOME, else ~/.cache; "
    "~/Library/Caches on macOS)"
)


def cache_dir() -> Path:
    """The folder caches of command-line tools go in, on this platform."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg)
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"])
    return Path.home() / ".cache"


def max_cache_bytes() -> int:
    text = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    if not text.isdigit():
        raise ClientError(f"{MAX_BYTES_ENV}={text!r}: expected a number of bytes")
    return int(text)


def _write_atomically(path: Path, data: bytes) -> None:
    """``data`` at ``path`` whole or not at all (a temp file renamed over it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class ChunkCache:
    """Chunks by BLAKE3 name, one file each (``ab/<name>``), checked on every read."""

    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.added = 0  # bytes put since this object was made: a trim is due
        self._since_trim = 0
        self._trim_every = max(max_bytes // 4, TRIM_EVERY_MIN)
        self._lock = threading.Lock()

    @classmethod
    def default(cls) -> ChunkCache:
        return cls(cache_dir() / APP_DIR / "chunks", max_cache_bytes())

    def _path(self, name: str) -> Path:
        return self.root / name[:2] / name

    def has(self, name: str) -> bool:
        return self._path(name).is_file()

    def get(self, name: str) -> bytes | None:
        """The chunk's bytes if cached and intact; a damaged copy is deleted (None)."""
        path = self._path(name)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if chunk_hash(data) != name:
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: evicted last
        return data

    def put(self, name: str, data: bytes) -> None:
        """Keep a chunk already checked against ``name``; a full or read-only disk is no error."""
        path = self._path(name)
        if path.exists():
            return
        try:
            _write_atomically(path, data)
        except OSError:
            return
        with self._lock:
            self.added += len(data)
            self._since_trim += len(data)
            due = self._since_trim >= self._trim_every
            if due:
                self._since_trim = 0
        if due:  # a transfer larger than the cap does not wait for its end to trim
            self.trim()

    def usage(self) -> tuple[int, int]:
        """(chunks, bytes) the cache holds now."""
        entries = self._entries()
        return len(entries), sum(size for _, size, _ in entries)

    def _entries(self) -> list[tuple[float, int, str]]:
        """(last use, size, path) of every cached chunk."""
        entries: list[tuple[float, int, str]] = []
        with contextlib.suppress(FileNotFoundError):
            for shard in os.scandir(self.root):
                if not shard.is_dir():
                    continue
                for entry in os.scandir(shard.path):
                    with contextlib.suppress(OSError):
                        st = entry.stat()
                        entries.append((st.st_mtime, st.st_size, entry.path))
        return entries

    def trim(self, max_bytes: int | None = None) -> int:
        """Delete the least recently used chunks until the cache fits its cap (or
        ``max_bytes``: 0 empties it); bytes freed."""
        cap = self.max_bytes if max_bytes is None else max_bytes
        entries = self._entries()
        total = sum(size for _, size, _ in entries)
        freed = 0
        entries.sort()
        for _, size, path in entries:
            if total - freed <= cap:
                break
            with contextlib.suppress(OSError):
                os.unlink(path)
                freed += size
        return freed


@dataclass(frozen=True)
class VerifiedCartons:
    """Carton files whose every member was checked against MANIFEST, as long as they are
    unchanged: a re-push of the same file need not hash it again."""

    path: Path

    @classmethod
    def default(cls) -> VerifiedCartons:
        return cls(cache_dir() / APP_DIR / "verified.json")

    @staticmethod
    def _key(carton: Path) -> str:
        st = carton.stat()
        identity = (
            f"{carton.resolve()}\0{st.st_dev}\0{st.st_ino}\0{st.st_size}\0"
            f"{st.st_mtime_ns}\0{st.st_ctime_ns}"
        )
        return hashlib.sha256(identity.encode()).hexdigest()

    def _load(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def verified(self, carton: Path, manifest_sha256: str) -> bool:
        try:
            return self._load().get(self._key(carton)) == manifest_sha256
        except OSError:
            return False

    def state(self, carton: Path) -> str | None:
        """The file as it is now (path, inode, size, times), to ``remember`` it by later."""
        try:
            return self._key(carton)
        except OSError:
            return None

    def remember(self, carton: Path, manifest_sha256: str, checked: str) -> None:
        """Remember ``carton`` as verified if it is still in the ``state`` it was in before
        its members were read (a file rewritten during the push is checked again)."""
        try:
            if (key := self._key(carton)) != checked:
                return
            entries = self._load()
            if list(entries.items())[-1:] == [(key, manifest_sha256)]:
                return  # a re-push of the newest entry: nothing to write
            entries.pop(key, None)
            entries[key] = manifest_sha256  # newest last
            kept = dict(list(entries.items())[-VERIFIED_KEPT:])
            _write_atomically(self.path, json.dumps(kept).encode())
        except OSError:
            return
