"""Helpers for the carton format tests: fixture paths, carton builders, zip patchers."""

from __future__ import annotations

import hashlib
import io
import os
import struct
import zipfile as stdzip
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path

from registry.carton import StoredZipLayout, ZipEntry, build_manifest, write_zip

REPO_ROOT = Path(__file__).resolve().parents[3]
FIXTURES = Path(os.environ.get("CARTON_FIXTURES", REPO_ROOT.parent / "shared" / "fixtures"))
REFERENCE = FIXTURES / "reference-packer"
CARTON_TOML_DIR = FIXTURES / "carton-toml"
FIXTURE_CARTONS = sorted(REFERENCE.glob("*.carton"))

MINIMAL_TOML = (
    b'spec_version = 1\n\n[runner]\nrunner_name = "noop"\n'
    b'required_framework_version = "=1.0.0"\nrunner_compat_version = 1\n'
)


def fixture_carton(prefix: str) -> Path:
    matches = [p for p in FIXTURE_CARTONS if p.name.startswith(prefix)]
    assert len(matches) == 1, f"no single fixture carton starts with {prefix!r}"
    return matches[0]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def carton_files(files: Mapping[str, bytes], with_toml: bool = True) -> dict[str, bytes]:
    """``files`` plus carton.toml (unless given) and a MANIFEST listing them."""
    out = dict(files)
    if with_toml:
        out.setdefault("carton.toml", MINIMAL_TOML)
    manifest = build_manifest((p, sha(d)) for p, d in out.items())
    out["MANIFEST"] = manifest.raw
    return out


def write_zip_bytes(files: Mapping[str, bytes], method: int = 0) -> bytes:
    buf = io.BytesIO()
    write_zip(buf, [(n, (lambda d=d: io.BytesIO(d)), method) for n, d in files.items()])
    return buf.getvalue()


def bytes_range(data: bytes):
    def read_range(offset: int, length: int) -> Iterator[bytes]:
        yield data[offset : offset + length]

    return read_range


def layout_for(files: Mapping[str, bytes]) -> StoredZipLayout:
    return StoredZipLayout(
        [ZipEntry(n, len(d), zlib.crc32(d), bytes_range(d)) for n, d in files.items()]
    )


def std_zip(
    entries: list[tuple[stdzip.ZipInfo | str, bytes]], compression: int = stdzip.ZIP_STORED
) -> bytes:
    """A zip written by the stdlib (for entries our writer refuses to make)."""
    buf = io.BytesIO()
    with stdzip.ZipFile(buf, "w", compression=compression) as z:
        for info, data in entries:
            z.writestr(info, data)
    return buf.getvalue()


def central_headers(data: bytes) -> Iterator[tuple[int, str]]:
    """(offset, name) of every central directory header."""
    z = stdzip.ZipFile(io.BytesIO(data))
    pos = z.start_dir
    for _ in z.infolist():
        assert data[pos : pos + 4] == b"PK\x01\x02"
        n, m, k = struct.unpack_from("<3H", data, pos + 28)
        yield pos, data[pos + 46 : pos + 46 + n].decode("utf-8", "replace")
        pos += 46 + n + m + k


_CENTRAL_FIELDS = {
    "flags": (8, "<H"),
    "method": (10, "<H"),
    "crc": (16, "<L"),
    "csize": (20, "<L"),
    "size": (24, "<L"),
}


def patch_central(data: bytes, name: str, **fields: int) -> bytes:
    """Overwrite fields of ``name``'s central directory header (headers that lie)."""
    out = bytearray(data)
    for pos, n in central_headers(data):
        if n == name:
            for key, value in fields.items():
                off, fmt = _CENTRAL_FIELDS[key]
                struct.pack_into(fmt, out, pos + off, value)
            return bytes(out)
    raise KeyError(name)


class LazyZip(io.RawIOBase):
    """A read-only seekable file over a StoredZipLayout (only ranges read are generated)."""

    def __init__(self, layout: StoredZipLayout) -> None:
        super().__init__()
        self.layout = layout
        self.pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.layout.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.layout.size if n is None or n < 0 else min(self.layout.size, self.pos + n)
        data = b"".join(self.layout.iter_bytes(self.pos, end))
        self.pos += len(data)
        return data

    def readinto(self, b) -> int:  # type: ignore[override]
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


def zeros_range(offset: int, length: int, chunk: int = 1 << 20) -> Iterator[bytes]:
    block = bytes(chunk)
    while length > 0:
        n = min(length, chunk)
        yield block if n == chunk else bytes(n)
        length -= n


def crc32_zeros(size: int, chunk: int = 1 << 20) -> int:
    crc = 0
    block = bytes(chunk)
    while size > 0:
        n = min(size, chunk)
        crc = zlib.crc32(block if n == chunk else bytes(n), crc)
        size -= n
    return crc
