"""The one byte form of a full carton (every file inline, no LINKS), whoever writes it.

A manifest hash names a carton's content; this names its bytes: Stored members with
fixed headers (no timestamps, no extra fields, no data descriptors), in the order
``carton.toml``, ``MANIFEST`` (its exact bytes), then every other MANIFEST file in
MANIFEST order. The registry's ``/cartons/{sha}.carton?form=full`` is laid out by
``full_layout``, and so are the CLI's ``pull --full`` (built from the chunk cache) and
``hydrate``: the same manifest gives the same file, byte for byte. ``FULL_LAYOUT_VERSION``
is in the registry's ETag for the full form (``"<sha>-full-v1"``); a client whose
version differs cannot reproduce the registry's bytes and must not claim to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from .manifest import Manifest
from .paths import CARTON_TOML, MANIFEST_NAME
from .streams import crc32
from .zipwrite import StoredZipLayout, ZipEntry

FULL_LAYOUT_VERSION = "1"  # bump when the full form's bytes change for the same manifest

ReadRange = Callable[[int, int], Iterator[bytes]]
"""``read_range(offset, length)``: exactly that slice of a file."""


def full_etag(manifest_sha256: str) -> str:
    """The registry's strong ETag of a full carton: its manifest and layout version."""
    return f'"{manifest_sha256}-full-v{FULL_LAYOUT_VERSION}"'


def _bytes_reader(data: bytes) -> ReadRange:
    def read_range(offset: int, length: int) -> Iterator[bytes]:
        yield data[offset : offset + length]

    return read_range


def full_layout(
    manifest: Manifest, files: Mapping[str, tuple[int, int, ReadRange]]
) -> StoredZipLayout:
    """The full carton of ``manifest``; ``files`` gives each MANIFEST path's (size, CRC-32,
    reader). Exact size and any byte range before a byte is read."""
    raw = manifest.raw
    entries = []
    if CARTON_TOML in files and any(e.path == CARTON_TOML for e in manifest):
        entries.append(ZipEntry(CARTON_TOML, *files[CARTON_TOML]))
    entries.append(ZipEntry(MANIFEST_NAME, len(raw), crc32(raw), _bytes_reader(raw)))
    entries += [ZipEntry(e.path, *files[e.path]) for e in manifest if e.path != CARTON_TOML]
    return StoredZipLayout(entries)
