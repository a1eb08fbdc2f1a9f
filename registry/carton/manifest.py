"""MANIFEST: the list of ``path=<sha256>`` lines whose hash names a carton.

Parsing is strict because the manifest hash is the carton's identity: two
byte-different manifests must never describe "the same" carton.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property

from .digests import is_sha256
from .errors import CartonFormatError
from .paths import LINKS_NAME, MANIFEST_NAME, path_problem


@dataclass(frozen=True)
class ManifestEntry:
    path: str
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """A parsed MANIFEST; ``raw`` is kept because its hash is the carton's name."""

    raw: bytes
    entries: tuple[ManifestEntry, ...]
    _by_path: dict[str, ManifestEntry] = field(
        init=False, repr=False, compare=False, hash=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        self._by_path.update((e.path, e) for e in self.entries)

    @cached_property
    def sha256(self) -> str:
        """The manifest hash (hex sha256 of the MANIFEST bytes)."""
        return hashlib.sha256(self.raw).hexdigest()

    @cached_property
    def paths(self) -> frozenset[str]:
        return frozenset(self._by_path)

    def get(self, path: str) -> ManifestEntry | None:
        return self._by_path.get(path)

    def __contains__(self, path: object) -> bool:
        return path in self._by_path

    def __iter__(self) -> Iterator[ManifestEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


def parse_manifest(raw: bytes) -> Manifest:
    """Parse MANIFEST bytes strictly (see module docstring); errors name line and path."""
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise TypeError("parse_manifest expects bytes")
    raw = bytes(raw)
    if not raw:
        raise CartonFormatError("MANIFEST is empty (a carton always lists carton.toml)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CartonFormatError(f"MANIFEST is not valid UTF-8 (byte {e.start})") from None
    if not text.endswith("\n"):
        raise CartonFormatError("MANIFEST: last line is not newline-terminated")
    entries: list[ManifestEntry] = []
    prev: bytes | None = None
    for lineno, line in enumerate(text[:-1].split("\n"), start=1):
        if "\r" in line:
            raise CartonFormatError(f"MANIFEST line {lineno}: carriage return not allowed")
        path, sep, digest = line.rpartition("=")
        if not sep:
            raise CartonFormatError(f"MANIFEST line {lineno}: expected 'path=sha256', got {line!r}")
        if not is_sha256(digest):
            raise CartonFormatError(
                f"MANIFEST line {lineno} ({path!r}): {digest!r} is not a lowercase hex sha256"
            )
        problem = path_problem(path)
        if problem is not None:
            raise CartonFormatError(f"MANIFEST line {lineno}: {problem}")
        if path in (MANIFEST_NAME, LINKS_NAME):
            # The spec: MANIFEST lists every file but itself and LINKS.
            raise CartonFormatError(
                f"MANIFEST line {lineno}: {path!r} must not be listed in MANIFEST"
            )
        key = path.encode("utf-8")
        if prev is not None and key <= prev:
            what = "duplicate path" if key == prev else "not sorted bytewise"
            raise CartonFormatError(f"MANIFEST line {lineno} ({path!r}): {what}")
        prev = key
        entries.append(ManifestEntry(path, digest))
    return Manifest(raw=raw, entries=tuple(entries))


def build_manifest(entries: Iterable[tuple[str, str]]) -> Manifest:
    """Build MANIFEST bytes exactly as the reference packer does (sorted, ``path=hex\\n``)."""
    items = sorted(((str(p), str(h)) for p, h in entries), key=lambda e: e[0].encode("utf-8"))
    raw = "".join(f"{p}={h}\n" for p, h in items).encode("utf-8")
    # parse_manifest validates paths, hashes, duplicates, and emptiness in one place.
    return parse_manifest(raw)
