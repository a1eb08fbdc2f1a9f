"""Reading carton archives without trusting them.

The central directory is parsed by ``backports.zstd.zipfile`` (Stored, Deflate,
zstd = method 93, ZIP64). Everything an attacker controls is checked when the
archive is opened, before a member byte is used (``zipchecks``), and every member
must be named by MANIFEST. Member data is then read by ``member.MemberReader``,
which verifies sizes and CRC-32 as it streams.
"""

from __future__ import annotations

import os
import stat
import struct
import threading
from typing import BinaryIO

from backports.zstd import zipfile

from .config import CartonConfig, parse_carton_toml
from .errors import CartonFormatError, CartonLimitExceeded
from .limits import ArchiveLimits
from .links import parse_links
from .manifest import Manifest, parse_manifest
from .member import Member, MemberReader
from .paths import CARTON_TOML, LINKS_NAME, MANIFEST_NAME
from .streams import hash_stream
from .zipchecks import (
    MAX_SYMLINK_BYTES,
    ROOT_TOLERATED,
    check_carton_toml_size,
    check_end_record,
    check_entry,
    check_listed,
    decode_name,
    resolve_symlinks,
)
from .zipformat import LOCAL_HEADER, LOCAL_MAGIC, STORED


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


class CartonArchive:
    """A carton zip opened with every archive-distrust check applied (see module doc)."""

    manifest: Manifest
    links: dict[str, list[str]] | None
    members: dict[str, Member]
    limits: ArchiveLimits
    _source: _Source

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
        cls, file: str | os.PathLike[str] | BinaryIO, limits: ArchiveLimits = ArchiveLimits()
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
        check_end_record(fp, self._lock, limits)
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
            name = decode_name(info)
            check_entry(info, name, limits)
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
            norm = name[1:] if name in ROOT_TOLERATED else name
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

        check_listed(self.members, self.manifest)
        self._resolve_symlinks(symlinks)
        toml = self.members.get(CARTON_TOML)
        if toml is not None:
            check_carton_toml_size(self.member_size(CARTON_TOML), limits)

    def _resolve_symlinks(self, links: list[Member]) -> None:
        """Point every symlink at a regular member inside the carton, or fail."""
        if not links:
            return
        texts: dict[str, str] = {}
        for m in links:
            raw = self._read_raw_member(m, MAX_SYMLINK_BYTES)
            try:
                texts[m.path] = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise CartonFormatError(f"symlink {m.path!r} target is not UTF-8") from None
        regular = {p for p, m in self.members.items() if not m.is_symlink} - {
            MANIFEST_NAME,
            LINKS_NAME,
        }
        for path, target in resolve_symlinks(texts, regular).items():
            self.members[path] = Member(**{**self.members[path].__dict__, "symlink_target": target})

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
            return fp.read(LOCAL_HEADER.size)

        if lock is not None:
            with lock:
                hdr = read_header()
        else:
            hdr = read_header()
        if len(hdr) != LOCAL_HEADER.size or hdr[:4] != LOCAL_MAGIC:
            raise CartonFormatError(f"{m.path}: bad local file header")
        fields = LOCAL_HEADER.unpack(hdr)
        name_length: int = fields[9]
        extra_length: int = fields[10]
        return m.header_offset + LOCAL_HEADER.size + name_length + extra_length

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

    def stored_span(self, path: str) -> tuple[int, int] | None:
        """(offset, size) of a Stored member's bytes in the zip (its local header checked),
        for readers that map the file; None for a compressed member. Unlike
        ``open_member``, nothing checks the CRC-32 of bytes read there."""
        m = self._resolve(path)
        if m.method != STORED:
            return None
        fp, lock, owns = self._source.reader()
        try:
            return self._data_offset(m, fp, lock), m.size
        finally:
            if owns:
                fp.close()

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
        return [
            e.path for e in self.manifest if e.path not in self.members and e.sha256 not in links
        ]

    @property
    def manifest_sha256(self) -> str:
        return self.manifest.sha256

    def config(self) -> CartonConfig | None:
        """Parsed carton.toml, or None when the zip does not hold it."""
        if not self._config_loaded:
            if CARTON_TOML in self.members:
                self._config = parse_carton_toml(
                    self.read_bytes(CARTON_TOML, self.limits.max_carton_toml_bytes)
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
    """(hex sha256, size) of a member, streamed and verified."""
    with archive.open_member(path) as reader:
        return hash_stream(reader)
