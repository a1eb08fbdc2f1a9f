"""Reading carton archives without trusting them.

The central directory is parsed by ``backports.zstd.zipfile`` (Stored, Deflate,
zstd = method 93, ZIP64). Everything an attacker controls is checked when the
archive is opened, before a member byte is used: methods, member count,
declared sizes and ratios, names, encryption, and that every member is named by
MANIFEST. Member data is then decompressed by our own streaming reader, because
zipfile silently truncates a member that inflates past its declared size; ours
rejects it, and checks the CRC-32, in constant memory.
"""

from __future__ import annotations

import hashlib
import io
import os
import posixpath
import stat
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from backports.zstd import ZstdDecompressor, ZstdError, zipfile

from .config import CartonConfig, parse_carton_toml
from .errors import CartonFormatError, CartonLimitExceeded
from .links import parse_links
from .manifest import LINKS_NAME, MANIFEST_NAME, Manifest, parse_manifest, path_problem

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

STORED, DEFLATED, ZSTD = 0, 8, 93
SUPPORTED_METHODS = {STORED: "Stored", DEFLATED: "Deflate", ZSTD: "zstd"}
CHUNK = MiB
_READ_CHUNK = 256 * KiB
_MAX_SYMLINK_BYTES = 4096
_MAX_SYMLINK_HOPS = 40
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")
_LOCAL_MAGIC = b"PK\x03\x04"


@dataclass(frozen=True)
class ArchiveLimits:
    """Limits enforced on open (defaults follow DESIGN.md "Default limits")."""

    max_members: int = 10_000
    max_unpacked_bytes: int = 256 * GiB
    max_compression_ratio: float = 1000.0
    compression_ratio_min_bytes: int = 16 * MiB
    max_carton_toml_bytes: int = 1 * MiB
    max_manifest_bytes: int = 16 * MiB
    max_links_bytes: int = 16 * MiB
    # Bytes of central directory allowed per permitted member (bounds parse memory).
    max_central_directory_bytes_per_member: int = 4 * KiB


@dataclass(frozen=True)
class Member:
    """One file entry of the zip (directories are not members)."""

    path: str
    raw_name: str
    method: int
    compressed_size: int
    size: int
    crc32: int
    # For symlinks: the in-carton path of the regular member the link resolves to.
    symlink_target: str | None = None
    header_offset: int = 0
    is_symlink: bool = False


class _Source:
    """Positioned reads of the archive: own handle per reader for paths, shared+lock else."""

    def __init__(self, path: str | None, fp: BinaryIO, lock: threading.Lock) -> None:
        self._path = path
        self._fp = fp
        self._lock = lock

    def reader(self) -> tuple[BinaryIO, threading.Lock | None, bool]:
        if self._path is not None:
            return open(self._path, "rb"), None, True
        return self._fp, self._lock, False


class MemberReader(io.RawIOBase):
    """Streaming, verifying reader of one member's uncompressed bytes.

    Raises CartonFormatError when the data inflates past the declared size,
    ends short of it, is truncated/corrupt, or fails its CRC-32.
    """

    def __init__(
        self,
        member: Member,
        fp: BinaryIO,
        lock: threading.Lock | None,
        owns_fp: bool,
        data_offset: int,
    ) -> None:
        super().__init__()
        self.member = member
        self._fp = fp
        self._lock = lock
        self._owns_fp = owns_fp
        self._pos = data_offset
        self._left = member.compressed_size
        self._produced = 0
        self._crc = 0
        self._buf = b""
        self._done = False
        self._method = member.method
        self._zlib = zlib.decompressobj(-15) if self._method == DEFLATED else None
        self._zstd: ZstdDecompressor | None = ZstdDecompressor() if self._method == ZSTD else None
        self._zstd_fed = False

    # -- raw compressed input -------------------------------------------------
    def _read_compressed(self, n: int) -> bytes:
        n = min(n, self._left)
        if n <= 0:
            return b""
        if self._lock is not None:
            with self._lock:
                self._fp.seek(self._pos)
                data = self._fp.read(n)
        else:
            self._fp.seek(self._pos)
            data = self._fp.read(n)
        if len(data) != n:
            raise CartonFormatError(f"{self.member.path}: archive truncated inside member data")
        self._pos += n
        self._left -= n
        return data

    def _fail(self, what: str) -> CartonFormatError:
        return CartonFormatError(f"{self.member.path}: {what}")

    # -- decompression ----------------------------------------------------------
    def _produce(self, n: int) -> bytes:
        """Up to ``n`` more bytes; the end (size, CRC) is verified before the last are returned."""
        data = self._next(n)
        if data and self._produced == self.member.size:
            self._next(1)  # raises if the stream inflates further; else checks the CRC
        return data

    def _next(self, n: int) -> bytes:
        """Up to ``n`` more uncompressed bytes; b"" only at the verified end of the member."""
        while True:
            if self._method == STORED:
                data = self._read_compressed(min(n, _READ_CHUNK))
                if not data:
                    return self._finish()
            elif self._method == DEFLATED:
                d = self._zlib
                assert d is not None
                if d.eof:
                    return self._finish()
                if d.unconsumed_tail:
                    data = d.decompress(d.unconsumed_tail, n)
                else:
                    chunk = self._read_compressed(_READ_CHUNK)
                    if not chunk:
                        raise self._fail("deflate stream is truncated")
                    try:
                        data = d.decompress(chunk, n)
                    except zlib.error as e:
                        raise self._fail(f"corrupt deflate data ({e})") from None
            else:
                data = self._zstd_step(n)
                if data is None:
                    return self._finish()
            if data:
                self._produced += len(data)
                if self._produced > self.member.size:
                    raise self._fail(f"inflates past its declared size of {self.member.size} bytes")
                self._crc = zlib.crc32(data, self._crc)
                return data

    def _zstd_step(self, n: int) -> bytes | None:
        """One zstd decode step (frames may lack a content size; several frames allowed)."""
        d = self._zstd
        assert d is not None
        try:
            if d.eof:
                rest = d.unused_data
                if not rest:
                    rest = self._read_compressed(_READ_CHUNK)
                    if not rest:
                        return None
                d = self._zstd = ZstdDecompressor()
                self._zstd_fed = True
                return d.decompress(rest, n)
            if d.needs_input:
                chunk = self._read_compressed(_READ_CHUNK)
                if not chunk:
                    if self._zstd_fed:
                        raise self._fail("zstd stream is truncated")
                    return None  # zero compressed bytes: an empty member
                self._zstd_fed = True
                return d.decompress(chunk, n)
            return d.decompress(b"", n)
        except ZstdError as e:
            raise self._fail(f"corrupt zstd data ({e})") from None

    def _finish(self) -> bytes:
        if not self._done:
            self._done = True
            if self._produced != self.member.size:
                raise self._fail(
                    f"holds {self._produced} bytes but its header declares {self.member.size}"
                )
            if self._crc != self.member.crc32:
                raise self._fail(
                    f"CRC-32 mismatch (got {self._crc:08x}, header says {self.member.crc32:08x})"
                )
        return b""

    # -- io API -------------------------------------------------------------------
    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if self.closed:
            raise ValueError("read from closed member reader")
        if size is None or size < 0:
            return self.readall()
        if size == 0:
            return b""
        if self._buf:
            out, self._buf = self._buf[:size], self._buf[size:]
            return out
        data = self._produce(min(size, CHUNK))
        if len(data) > size:
            data, self._buf = data[:size], data[size:]
        return data

    def readall(self) -> bytes:
        parts = [self._buf]
        self._buf = b""
        while True:
            data = self._produce(CHUNK)
            if not data:
                return b"".join(parts)
            parts.append(data)

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(b))
        n = len(data)
        memoryview(b).cast("B")[:n] = data
        return n

    def iter_chunks(self, chunk_size: int = CHUNK) -> Iterator[bytes]:
        """Yield the member in chunks; the last (empty) read verifies size and CRC."""
        while True:
            data = self.read(chunk_size)
            if not data:
                return
            yield data

    def close(self) -> None:
        if not self.closed and self._owns_fp:
            self._fp.close()
        super().close()


def _decode_name(info: zipfile.ZipInfo) -> str:
    """The member name as UTF-8, also when a writer forgot the UTF-8 flag (bit 11)."""
    name = info.orig_filename
    if not info.flag_bits & 0x800 and not name.isascii():
        try:
            return name.encode("cp437").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            pass
    return name


def _list_some(items: list[str], limit: int = 5) -> str:
    shown = ", ".join(repr(i) for i in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


class CartonArchive:
    """A carton zip opened with every archive-distrust check applied (see module doc)."""

    manifest: Manifest
    links: dict[str, list[str]] | None
    members: dict[str, Member]

    def __init__(self) -> None:  # use CartonArchive.open
        self._fp: BinaryIO | None = None
        self._owns_fp = False
        self._zf: zipfile.ZipFile | None = None
        self._lock = threading.Lock()
        self._config: CartonConfig | None = None
        self._config_loaded = False
        self.dirs: set[str] = set()
        self.links = None
        self.members = {}

    # -- opening --------------------------------------------------------------------
    @classmethod
    def open(
        cls, file: str | os.PathLike | BinaryIO, limits: ArchiveLimits = ArchiveLimits()
    ) -> CartonArchive:
        self = cls()
        self.limits = limits
        path: str | None = None
        if isinstance(file, str | os.PathLike):
            path = os.fspath(file)
            self._fp = open(path, "rb")  # noqa: SIM115 - closed in close()
            self._owns_fp = True
        else:
            self._fp = file
        self._source = _Source(path, self._fp, self._lock)
        try:
            self._load()
        except BaseException:
            self.close()
            raise
        return self

    def _load(self) -> None:
        fp, limits = self._fp, self.limits
        assert fp is not None
        self._precheck_end_record(fp)
        try:
            with self._lock:
                self._zf = zipfile.ZipFile(fp, "r")
        except zipfile.BadZipFile as e:
            raise CartonFormatError(f"not a zip archive ({e})") from None
        except (NotImplementedError, ValueError, EOFError, OSError, struct.error) as e:
            raise CartonFormatError(f"not a readable zip archive ({e})") from None
        infos = self._zf.infolist()
        if len(infos) > limits.max_members:
            raise CartonLimitExceeded(
                f"archive has {len(infos)} entries, more than the limit of {limits.max_members}"
            )
        self._infos: dict[str, zipfile.ZipInfo] = {}
        total = 0
        offsets: set[int] = set()
        symlinks: list[Member] = []
        for info in infos:
            name = _decode_name(info)
            self._check_entry(info, name)
            total += info.file_size
            if info.header_offset in offsets:
                raise CartonFormatError(f"entry {name!r} overlaps another entry (zip bomb?)")
            offsets.add(info.header_offset)
            if name.endswith("/"):
                dpath = name.rstrip("/")
                if dpath in self.dirs or dpath in self.members:
                    raise CartonFormatError(f"duplicate entry {name!r}")
                self.dirs.add(dpath)
                continue
            norm = name[1:] if name in ("/" + MANIFEST_NAME, "/" + LINKS_NAME) else name
            if norm in self.members or norm in self.dirs:
                raise CartonFormatError(f"duplicate entry {norm!r} in the archive")
            is_link = info.create_system == 3 and stat.S_ISLNK(info.external_attr >> 16)
            m = Member(
                path=norm,
                raw_name=name,
                method=info.compress_type,
                compressed_size=info.compress_size,
                size=info.file_size,
                crc32=info.CRC,
                header_offset=info.header_offset,
                is_symlink=is_link,
            )
            self.members[norm] = m
            self._infos[norm] = info
            if is_link:
                symlinks.append(m)
        if total > limits.max_unpacked_bytes:
            raise CartonLimitExceeded(
                f"archive unpacks to {total} bytes, more than the limit of "
                f"{limits.max_unpacked_bytes}"
            )

        if MANIFEST_NAME not in self.members:
            raise CartonFormatError("archive has no MANIFEST")
        if self.members[MANIFEST_NAME].is_symlink or (
            LINKS_NAME in self.members and self.members[LINKS_NAME].is_symlink
        ):
            raise CartonFormatError("MANIFEST and LINKS cannot be symlinks")
        self.manifest = parse_manifest(self.read_bytes(MANIFEST_NAME, limits.max_manifest_bytes))
        if LINKS_NAME in self.members:
            self.links = parse_links(self.read_bytes(LINKS_NAME, limits.max_links_bytes))

        extra = sorted(
            p
            for p in self.members
            if p not in (MANIFEST_NAME, LINKS_NAME) and p not in self.manifest
        )
        if extra:
            raise CartonFormatError(f"archive members not listed in MANIFEST: {_list_some(extra)}")
        self._resolve_symlinks(symlinks)
        toml = self.members.get("carton.toml")
        if toml is not None:
            size = self.members[toml.symlink_target].size if toml.symlink_target else toml.size
            if size > limits.max_carton_toml_bytes:
                raise CartonLimitExceeded(
                    f"carton.toml is {size} bytes, more than the limit of "
                    f"{limits.max_carton_toml_bytes}"
                )

    def _precheck_end_record(self, fp: BinaryIO) -> None:
        """Reject absurd entry counts / directory sizes before zipfile loads the directory."""
        try:
            with self._lock:
                endrec = zipfile._EndRecData(fp)  # type: ignore[attr-defined]
        except (OSError, ValueError, struct.error, EOFError):
            endrec = None
        if not endrec:
            raise CartonFormatError("not a zip archive (no end of central directory record)")
        entries, cd_size = endrec[4], endrec[5]
        limits = self.limits
        if entries > limits.max_members:
            raise CartonLimitExceeded(
                f"archive has {entries} entries, more than the limit of {limits.max_members}"
            )
        max_cd = max(MiB, limits.max_members * limits.max_central_directory_bytes_per_member)
        if cd_size > max_cd:
            raise CartonLimitExceeded(
                f"central directory is {cd_size} bytes, more than the limit of {max_cd}"
            )

    def _check_entry(self, info: zipfile.ZipInfo, name: str) -> None:
        limits = self.limits
        if "\x00" in name:
            raise CartonFormatError(f"entry name {name!r} contains NUL")
        if info.flag_bits & 0x41:
            raise CartonFormatError(f"entry {name!r} is encrypted")
        if info.flag_bits & 0x20:
            raise CartonFormatError(f"entry {name!r} uses compressed patched data")
        if info.compress_type not in SUPPORTED_METHODS:
            raise CartonFormatError(
                f"entry {name!r} uses unsupported compression method {info.compress_type} "
                "(only Stored, Deflate and zstd are allowed)"
            )
        if "\\" in name:
            raise CartonFormatError(f"entry name {name!r} contains a backslash")
        if name.startswith("/") and name not in ("/" + MANIFEST_NAME, "/" + LINKS_NAME):
            raise CartonFormatError(f"entry name {name!r} is an absolute path")
        if ".." in name.split("/"):
            raise CartonFormatError(f"entry name {name!r} has a '..' segment")
        if not name.startswith("/"):
            problem = path_problem(name[:-1] if name.endswith("/") else name)
            if problem is not None:
                raise CartonFormatError(f"bad entry name: {problem}")
        if name.endswith("/") and info.file_size:
            raise CartonFormatError(f"directory entry {name!r} holds data")
        if info.compress_type == STORED and info.compress_size != info.file_size:
            raise CartonFormatError(
                f"stored entry {name!r} declares {info.file_size} bytes but holds "
                f"{info.compress_size}"
            )
        if info.file_size > limits.compression_ratio_min_bytes and (
            info.compress_size == 0
            or info.file_size / info.compress_size > limits.max_compression_ratio
        ):
            raise CartonLimitExceeded(
                f"entry {name!r} has a compression ratio above {limits.max_compression_ratio:g} "
                f"({info.file_size} bytes from {info.compress_size})"
            )

    def _resolve_symlinks(self, links: list[Member]) -> None:
        """Point every symlink at a regular member inside the carton, or fail."""
        if not links:
            return
        texts: dict[str, str] = {}
        for m in links:
            raw = self._read_raw_member(m, _MAX_SYMLINK_BYTES)
            try:
                texts[m.path] = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise CartonFormatError(f"symlink {m.path!r} target is not UTF-8") from None
        for m in links:
            cur, hops = m.path, 0
            while cur in texts:
                target = texts[cur]
                if target.startswith("/") or "\x00" in target or "\\" in target or not target:
                    raise CartonFormatError(f"symlink {m.path!r} points outside the carton")
                joined = posixpath.normpath(posixpath.join(posixpath.dirname(cur), target))
                if joined == ".." or joined.startswith("../") or joined in (".", ""):
                    raise CartonFormatError(f"symlink {m.path!r} points outside the carton")
                hops += 1
                if hops > _MAX_SYMLINK_HOPS or joined == m.path:
                    raise CartonFormatError(f"symlink {m.path!r} is part of a loop")
                cur = joined
            if cur not in self.members or cur in (MANIFEST_NAME, LINKS_NAME):
                raise CartonFormatError(
                    f"symlink {m.path!r} points to {cur!r}, which is not a file in the carton"
                )
            self.members[m.path] = Member(**{**m.__dict__, "symlink_target": cur})

    # -- reading ---------------------------------------------------------------------
    def _data_offset(self, m: Member, fp: BinaryIO, lock: threading.Lock | None) -> int:
        """Offset of the member's data, after checking the local header matches."""
        info = self._infos[m.path]
        if self._zf is not None:
            try:
                with self._lock:
                    self._zf.open(info).close()
            except (
                zipfile.BadZipFile,
                NotImplementedError,
                RuntimeError,
                OSError,
                ValueError,
                EOFError,
                struct.error,
            ) as e:
                raise CartonFormatError(f"{m.path}: bad local header ({e})") from None

        def read_header() -> bytes:
            fp.seek(m.header_offset)
            return fp.read(_LOCAL_HEADER.size)

        if lock is not None:
            with lock:
                hdr = read_header()
        else:
            hdr = read_header()
        if len(hdr) != _LOCAL_HEADER.size or hdr[:4] != _LOCAL_MAGIC:
            raise CartonFormatError(f"{m.path}: bad local file header")
        fields = _LOCAL_HEADER.unpack(hdr)
        return m.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10]

    def _read_raw_member(self, m: Member, max_bytes: int) -> bytes:
        """Bytes of ``m`` itself (a symlink's own content is its target text)."""
        if m.size > max_bytes:
            raise CartonLimitExceeded(f"{m.path} is {m.size} bytes, more than {max_bytes}")
        with self._open_raw(m) as r:
            return r.read()

    def _open_raw(self, m: Member) -> MemberReader:
        fp, lock, owns = self._source.reader()
        try:
            offset = self._data_offset(m, fp, lock)
        except BaseException:
            if owns:
                fp.close()
            raise
        return MemberReader(m, fp, lock, owns, offset)

    def _resolve(self, path: str) -> Member:
        m = self.members.get(path)
        if m is None:
            raise KeyError(f"{path!r} is not in the archive")
        if m.symlink_target is not None:
            return self.members[m.symlink_target]
        return m

    def open_member(self, path: str) -> MemberReader:
        """Stream a member's uncompressed bytes (symlinks followed), verified as it goes.

        Raises KeyError for a path with no member in the zip.
        """
        return self._open_raw(self._resolve(path))

    def member_size(self, path: str) -> int:
        """Declared uncompressed size of a member (of its target for symlinks)."""
        return self._resolve(path).size

    def read_bytes(self, path: str, max_bytes: int) -> bytes:
        """A small member whole; CartonLimitExceeded when it is larger than ``max_bytes``."""
        m = self._resolve(path)
        return self._read_raw_member(m, max_bytes)

    def present_paths(self) -> list[str]:
        """MANIFEST paths whose bytes are in the zip (symlinks included), MANIFEST order."""
        return [e.path for e in self.manifest if e.path in self.members]

    def missing_paths(self) -> list[str]:
        """MANIFEST paths not in the zip (a slim carton's LINKS must cover them)."""
        return [e.path for e in self.manifest if e.path not in self.members]

    def unresolvable_paths(self) -> list[str]:
        """Missing paths whose sha256 LINKS does not list."""
        links = self.links or {}
        return [p for p in self.missing_paths() if self.manifest.get(p).sha256 not in links]  # type: ignore[union-attr]

    @property
    def manifest_sha256(self) -> str:
        return self.manifest.sha256

    def config(self) -> CartonConfig | None:
        """Parsed carton.toml, or None when the zip does not hold it."""
        if not self._config_loaded:
            if "carton.toml" in self.members:
                self._config = parse_carton_toml(
                    self.read_bytes("carton.toml", self.limits.max_carton_toml_bytes)
                )
            self._config_loaded = True
        return self._config

    # -- lifecycle ---------------------------------------------------------------------
    def close(self) -> None:
        if self._zf is not None:
            self._zf.close()
            self._zf = None
        if self._fp is not None and self._owns_fp:
            self._fp.close()
        self._fp = None

    def __enter__(self) -> CartonArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sha256_member(archive: CartonArchive, path: str) -> tuple[str, int]:
    """(hex sha256, size) of a member, streamed in 1 MiB chunks and verified."""
    h = hashlib.sha256()
    size = 0
    with archive.open_member(path) as r:
        while True:
            chunk = r.read(CHUNK)
            if not chunk:
                break
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size
