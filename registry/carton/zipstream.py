"""Reading a carton zip as it arrives: one forward pass, nothing spooled.

A push must not write every byte twice, so this reader walks the local file
headers in order and hands out each member's uncompressed bytes while the body
streams in, verifying the size and CRC-32 of every member as ``MemberReader``
does (no member may inflate past its declared size). No maintained Python
library streams zip members compressed with zstd (method 93), so the local
headers and data descriptors are parsed here; the central directory that
follows the last member is parsed by ``backports.zstd``'s ``zipfile``, over a
file object that holds only the archive's tail, and every one of its entries is
then cross-checked against the local header and the bytes actually seen:
offset, name, method, flags, sizes, CRC-32. Only after ``finish()`` returns is
the archive trusted; callers publish nothing before that.

Stored members whose sizes follow the data (flag bit 3, as streaming writers
such as ours, Go's and Python's write them) end where a data descriptor with
the signature ``PK\\x07\\x08`` matches the CRC-32 and the byte count seen so far.
A forged descriptor inside member data can only end the member early, and
then the central directory cross-check rejects the archive.
"""

from __future__ import annotations

import stat
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from backports.zstd import zipfile

from .errors import CartonFormatError, CartonLimitExceeded
from .limits import ArchiveLimits
from .links import parse_links
from .manifest import Manifest, parse_manifest
from .paths import CARTON_TOML, LINKS_NAME, MANIFEST_NAME
from .streams import Readable, ReadStream
from .zipchecks import (
    MAX_SYMLINK_BYTES,
    ROOT_TOLERATED,
    check_carton_toml_size,
    check_listed,
    decode_raw_name,
    entry_problem,
    not_a_zip,
    ratio_problem,
    raw_name,
    resolve_symlinks,
)
from .zipformat import LOCAL_HEADER, LOCAL_MAGIC, STORED
from .zipmember import (
    CENTRAL_MAGIC,
    FLAG_DESCRIPTOR,
    ForwardInput,
    MemberStream,
    StreamEntry,
)

_EMPTY_ARCHIVE_MAGIC = b"PK\x05\x06"
_U32_MAX = 0xFFFFFFFF
_FLAG_ENCRYPTED = 0x41
_MAX_COMMENT_AND_END_RECORDS = 65535 + 22 + 56 + 20


@dataclass(frozen=True)
class CentralEntry:
    """An entry of the central directory, after the cross-check with its local header."""

    path: str
    size: int
    crc32: int
    method: int
    header_offset: int
    is_symlink: bool


class ZipStream:
    """Iterate the local entries of a zip read from ``source``; then ``finish()``.

    The caller reads each entry (or not: moving on drains it) before asking for
    the next; every byte is checked as it passes. Archive limits apply as the
    stream goes: entry count, unpacked bytes, compression ratio, and the
    push-wide ratio of unpacked to received bytes.
    """

    def __init__(self, source: Readable, limits: ArchiveLimits = ArchiveLimits()) -> None:
        self.limits = limits
        self._in = ForwardInput(source)
        self.entries: list[StreamEntry] = []
        self.unpacked = 0
        self._finished = False

    def account(self, entry: StreamEntry, n: int) -> None:
        self.unpacked += n
        limits = self.limits
        if self.unpacked > limits.max_unpacked_bytes:
            raise CartonLimitExceeded(
                f"archive unpacks to more than the limit of {limits.max_unpacked_bytes} bytes"
            )
        allowed = max(limits.expansion_min_bytes, limits.max_expansion_ratio * self._in.offset)
        if self.unpacked > allowed:
            raise CartonLimitExceeded(
                f"archive unpacks to more than {limits.max_expansion_ratio:g} times the "
                f"{self._in.offset} bytes received so far (REGISTRY_MAX_EXPANSION_RATIO; at "
                f"least {limits.expansion_min_bytes} bytes are always allowed)"
            )
        if entry.method != STORED and entry.size > limits.compression_ratio_min_bytes:
            # Also while streaming: a member whose header hides its sizes is held to the ratio.
            compressed = max(entry.compressed_size, 1)
            if entry.size / compressed > limits.max_compression_ratio:
                raise CartonLimitExceeded(
                    f"entry {entry.path!r} has a compression ratio above "
                    f"{limits.max_compression_ratio:g}"
                )

    def __iter__(self) -> Iterator[StreamEntry]:
        while True:
            if self.entries and not self.entries[-1].done:
                self.entries[-1].drain()
            magic = self._in.peek(4)
            if magic == LOCAL_MAGIC:
                yield self._local_entry()
                continue
            if magic == CENTRAL_MAGIC or (magic == _EMPTY_ARCHIVE_MAGIC and not self.entries):
                return
            if len(magic) < 4:  # the stream ended where a header or the directory should be
                head = LOCAL_MAGIC if self.entries else magic
                raise CartonFormatError(not_a_zip(self._in.offset + len(magic), head))
            if not self.entries:
                raise CartonFormatError(not_a_zip(self._in.offset + len(magic), magic))
            raise CartonFormatError(
                f"not a zip archive (unexpected bytes at offset {self._in.offset})"
            )

    def _local_entry(self) -> StreamEntry:
        if len(self.entries) >= self.limits.max_members:
            raise CartonLimitExceeded(
                f"archive has more than the limit of {self.limits.max_members} entries"
            )
        offset = self._in.offset
        fields = LOCAL_HEADER.unpack(self._in.read_exact(LOCAL_HEADER.size, "a local file header"))
        _, _version, flags, method, _time, _date, crc, csize, size, name_len, extra_len = fields
        raw = self._in.read_exact(name_len, "a local file header")
        extra = self._in.read_exact(extra_len, "a local file header")
        name = decode_raw_name(raw, flags)
        if csize == _U32_MAX or size == _U32_MAX:
            size, csize = _zip64_sizes(extra, size, csize, name)
        described = bool(flags & FLAG_DESCRIPTOR)
        problem = entry_problem(
            name, flags, method, None if described else csize, None if described else size
        )
        if problem is None and not described:
            problem = ratio_problem(name, csize, size, self.limits)
            if problem is not None:
                raise CartonLimitExceeded(problem)
        if problem is not None:
            raise CartonFormatError(problem)
        path = name[1:] if name in ROOT_TOLERATED else name
        entry = StreamEntry(
            path=path,
            raw_name=raw,
            flags=flags,
            method=method,
            header_offset=offset,
            declared_crc32=None if described else crc,
            declared_size=None if described else size,
            declared_compressed_size=None if described else csize,
        )
        entry._reader = MemberStream(
            entry, self._in, self.account, max(MAX_SYMLINK_BYTES, self.limits.max_manifest_bytes)
        )
        self.entries.append(entry)
        return entry

    def finish(self) -> dict[str, CentralEntry]:
        """Read the central directory and cross-check it; the archive's entries by path."""
        if self._finished:
            raise RuntimeError("finish() called twice")
        for _ in self:  # any entries the caller did not ask for are read (and checked) too
            pass
        self._finished = True
        cd_start = self._in.offset
        limits = self.limits
        max_cd = max(1 << 20, limits.max_members * limits.max_central_directory_bytes_per_member)
        tail = self._in.rest(max_cd + _MAX_COMMENT_AND_END_RECORDS, "the central directory")
        try:
            infos = zipfile.ZipFile(_TailFile(cd_start, tail)).infolist()
        except zipfile.BadZipFile as exc:
            raise CartonFormatError(f"not a zip archive ({exc})") from None
        except (NotImplementedError, ValueError, EOFError, OSError, struct.error) as exc:
            raise CartonFormatError(f"not a readable zip archive ({exc})") from None
        return self._cross_check(infos, cd_start)

    def _cross_check(self, infos: list[zipfile.ZipInfo], cd_start: int) -> dict[str, CentralEntry]:
        by_offset = {e.header_offset: e for e in self.entries}
        if len(infos) != len(self.entries):
            raise CartonFormatError(
                f"central directory lists {len(infos)} entries, the archive holds "
                f"{len(self.entries)}"
            )
        result: dict[str, CentralEntry] = {}
        seen: set[str] = set()
        for info in infos:
            local = by_offset.pop(info.header_offset, None)
            if local is None or info.header_offset >= cd_start:
                raise CartonFormatError(
                    f"central directory entry {info.orig_filename!r} points to no local entry"
                )
            raw = raw_name(info)
            if raw != local.raw_name:
                raise CartonFormatError(
                    f"entry {local.path!r} is named {info.orig_filename!r} in the central directory"
                )
            if (
                info.compress_type != local.method
                or local.crc32 != info.CRC
                or info.file_size != local.size
                or info.compress_size != local.compressed_size
                or (info.flag_bits ^ local.flags) & (_FLAG_ENCRYPTED | FLAG_DESCRIPTOR)
            ):
                raise CartonFormatError(
                    f"entry {local.path!r}: the central directory disagrees with its local "
                    "header or its data (method, CRC-32, sizes or flags)"
                )
            problem = entry_problem(
                decode_raw_name(raw, info.flag_bits),
                info.flag_bits,
                info.compress_type,
                info.compress_size,
                info.file_size,
            ) or ratio_problem(local.path, info.compress_size, info.file_size, self.limits)
            if problem is not None:
                raise CartonFormatError(problem)
            key = local.path.rstrip("/")
            if key in seen:
                raise CartonFormatError(f"duplicate entry {local.path!r} in the archive")
            seen.add(key)
            result[local.path] = CentralEntry(
                path=local.path,
                size=local.size,
                crc32=local.crc32,
                method=local.method,
                header_offset=local.header_offset,
                is_symlink=info.create_system == 3 and stat.S_ISLNK(info.external_attr >> 16),
            )
        return result


def _zip64_sizes(extra: bytes, size: int, csize: int, name: str) -> tuple[int, int]:
    """Sizes from the ZIP64 extra field of a local header (both are present there)."""
    at = 0
    while at + 4 <= len(extra):
        tag, length = struct.unpack_from("<2H", extra, at)
        body = extra[at + 4 : at + 4 + length]
        if tag == 1:
            values = list(struct.unpack_from(f"<{len(body) // 8}Q", body))
            if size == _U32_MAX:
                if not values:
                    break
                size = values.pop(0)
            if csize == _U32_MAX:
                if not values:
                    break
                csize = values.pop(0)
            return size, csize
        at += 4 + length
    raise CartonFormatError(f"entry {name!r}: sizes overflow but there is no ZIP64 extra field")


class _TailFile(ReadStream):
    """The archive as zipfile sees it: only the bytes from the central directory on are real."""

    def __init__(self, tail_offset: int, tail: bytes) -> None:
        super().__init__()
        self._start = tail_offset
        self._tail = tail
        self._size = tail_offset + len(tail)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, n: int | None = -1) -> bytes:
        end = self._size if n is None or n < 0 else min(self._size, self._pos + n)
        if end <= self._pos:
            return b""
        gap = max(0, min(end, self._start) - self._pos)  # member data: not kept, never needed
        data = b"\x00" * gap + self._tail[max(0, self._pos - self._start) : end - self._start]
        self._pos = end
        return data


@dataclass(frozen=True)
class StreamedCarton:
    """A streamed archive that passed every carton rule ``CartonArchive`` applies on open."""

    manifest: Manifest
    links: dict[str, list[str]] | None
    # MANIFEST path -> the zip entry whose bytes it has (itself, or a symlink's target).
    sources: dict[str, str]
    central: dict[str, CentralEntry]

    def size_of(self, path: str) -> int:
        return self.central[self.sources[path]].size


def check_carton(
    entries: list[StreamEntry], central: dict[str, CentralEntry], limits: ArchiveLimits
) -> StreamedCarton:
    """MANIFEST and LINKS parsed, every member named by MANIFEST, symlinks resolved."""
    by_path = {e.path: e for e in entries}
    files = {p: c for p, c in central.items() if not p.endswith("/")}
    if MANIFEST_NAME not in files:
        raise CartonFormatError("archive has no MANIFEST")
    if files[MANIFEST_NAME].is_symlink or (LINKS_NAME in files and files[LINKS_NAME].is_symlink):
        raise CartonFormatError("MANIFEST and LINKS cannot be symlinks")
    manifest = parse_manifest(_captured(by_path[MANIFEST_NAME], limits.max_manifest_bytes))
    links = (
        parse_links(_captured(by_path[LINKS_NAME], limits.max_links_bytes))
        if LINKS_NAME in files
        else None
    )
    check_listed(files, manifest)
    regular = {p for p, c in files.items() if not c.is_symlink}
    texts: dict[str, str] = {}
    for path, c in files.items():
        if c.is_symlink:
            raw = _captured(by_path[path], MAX_SYMLINK_BYTES)
            try:
                texts[path] = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise CartonFormatError(f"symlink {path!r} target is not UTF-8") from None
    targets = resolve_symlinks(texts, regular - {MANIFEST_NAME, LINKS_NAME})
    sources = {p: targets.get(p, p) for p in files if p not in (MANIFEST_NAME, LINKS_NAME)}
    toml = sources.get(CARTON_TOML)
    if toml is not None:
        check_carton_toml_size(files[toml].size, limits)
    return StreamedCarton(manifest, links, sources, central)


def _captured(entry: StreamEntry, limit: int) -> bytes:
    if entry.size > limit:
        raise CartonLimitExceeded(f"{entry.path} is {entry.size} bytes, more than {limit}")
    assert entry.captured is not None, f"{entry.path} was not captured"
    return entry.captured
