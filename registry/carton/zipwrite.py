"""Byte-deterministic zip writers.

Same inputs, same bytes: fixed DOS timestamp (1980-01-01 00:00), entries in
the order given, fixed modes (0o644, created on Unix), UTF-8 names (flag bit
11), fixed compression levels, ZIP64 records only when a size or offset needs
them. ``StoredZipLayout`` knows its total size and any byte range before
reading member data, so rebuilt cartons get Content-Length, ETag and Range.
"""

from __future__ import annotations

import bisect
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from backports.zstd import CompressionParameter, ZstdCompressor

from .errors import CartonFormatError
from .streams import CHUNK, ByteStream, crc32, read_full
from .zipformat import DEFLATED, LOCAL_HEADER, LOCAL_MAGIC, STORED, ZSTD

DEFLATE_LEVEL = 6
ZSTD_LEVEL = 3

_U32_MAX = 0xFFFFFFFF
_U16_MAX = 0xFFFF
_DOS_TIME = 0
_DOS_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01
_FLAG_UTF8 = 0x0800
_FLAG_DESCRIPTOR = 0x0008
_VERSION_MADE_BY = (3 << 8) | 63  # Unix, spec 6.3
_EXTERNAL_ATTR = 0o100644 << 16
_CENTRAL = struct.Struct("<4s6H3L5H2L")
_EOCD = struct.Struct("<4s4H2LH")
_EOCD64 = struct.Struct("<4sQ2H2L4Q")
_LOCATOR64 = struct.Struct("<4sLQL")


def _encode_name(name: str) -> bytes:
    if not name or "\x00" in name or "\\" in name:
        raise CartonFormatError(f"bad zip entry name {name!r}")
    raw = name.encode("utf-8")
    if len(raw) > _U16_MAX:
        raise CartonFormatError(f"zip entry name too long: {name[:40]!r}...")
    return raw


def _version_needed(method: int, zip64: bool) -> int:
    v = 45 if zip64 else 20
    if method == ZSTD:
        v = max(v, 63)
    return v


def _local_header(
    name: bytes, method: int, flags: int, crc: int, csize: int, size: int, zip64: bool
) -> bytes:
    extra = b""
    if zip64:
        extra = struct.pack("<2H2Q", 1, 16, size, csize)
        csize_f = size_f = _U32_MAX
    else:
        csize_f, size_f = csize, size
    header = LOCAL_HEADER.pack(
        LOCAL_MAGIC,
        _version_needed(method, zip64),
        flags,
        method,
        _DOS_TIME,
        _DOS_DATE,
        crc,
        csize_f,
        size_f,
        len(name),
        len(extra),
    )
    return header + name + extra


def _central_header(
    name: bytes, method: int, flags: int, crc: int, csize: int, size: int, offset: int
) -> bytes:
    fields: list[int] = []
    size_f, csize_f, off_f = size, csize, offset
    if size >= _U32_MAX:
        fields.append(size)
        size_f = _U32_MAX
    if csize >= _U32_MAX:
        fields.append(csize)
        csize_f = _U32_MAX
    if offset >= _U32_MAX:
        fields.append(offset)
        off_f = _U32_MAX
    extra = struct.pack(f"<2H{len(fields)}Q", 1, 8 * len(fields), *fields) if fields else b""
    return (
        _CENTRAL.pack(
            b"PK\x01\x02",
            _VERSION_MADE_BY,
            _version_needed(method, bool(fields)),
            flags,
            method,
            _DOS_TIME,
            _DOS_DATE,
            crc,
            csize_f,
            size_f,
            len(name),
            len(extra),
            0,
            0,
            0,
            _EXTERNAL_ATTR,
            off_f,
        )
        + name
        + extra
    )


def _end_records(count: int, cd_offset: int, cd_size: int, comment: bytes) -> bytes:
    """EOCD, preceded by ZIP64 EOCD + locator when a field overflows."""
    if len(comment) > _U16_MAX:
        raise CartonFormatError("zip comment too long")
    out = b""
    need64 = count >= _U16_MAX or cd_offset >= _U32_MAX or cd_size >= _U32_MAX
    if need64:
        eocd64_offset = cd_offset + cd_size
        out += _EOCD64.pack(
            b"PK\x06\x06",
            _EOCD64.size - 12,
            _VERSION_MADE_BY,
            45,
            0,
            0,
            count,
            count,
            cd_size,
            cd_offset,
        )
        out += _LOCATOR64.pack(b"PK\x06\x07", 0, eocd64_offset, 1)
    out += _EOCD.pack(
        b"PK\x05\x06",
        0,
        0,
        min(count, _U16_MAX),
        min(count, _U16_MAX),
        min(cd_size, _U32_MAX),
        min(cd_offset, _U32_MAX),
        len(comment),
    )
    return out + comment


@dataclass(frozen=True)
class ZipEntry:
    """A Stored member whose size and CRC-32 are known before writing.

    ``read_range(offset, length)`` yields exactly that slice of the member.
    """

    name: str
    size: int
    crc32: int
    read_range: Callable[[int, int], Iterator[bytes]]


class StoredZipLayout:
    """A Stored-only zip laid out in advance: exact ``size`` and any byte range."""

    def __init__(self, entries: Sequence[ZipEntry], comment: bytes = b"") -> None:
        self.entries = tuple(entries)
        # segments: (start offset, bytes or entry index)
        self._starts: list[int] = []
        self._parts: list[bytes | int] = []
        names: set[str] = set()
        pos = 0
        central: list[bytes] = []
        for i, e in enumerate(self.entries):
            if e.name in names:
                raise CartonFormatError(f"duplicate zip entry {e.name!r}")
            names.add(e.name)
            if e.size < 0 or not 0 <= e.crc32 <= _U32_MAX:
                raise CartonFormatError(f"bad size or crc32 for zip entry {e.name!r}")
            raw = _encode_name(e.name)
            zip64 = e.size >= _U32_MAX
            header = _local_header(raw, STORED, _FLAG_UTF8, e.crc32, e.size, e.size, zip64)
            central.append(_central_header(raw, STORED, _FLAG_UTF8, e.crc32, e.size, e.size, pos))
            self._add(pos, header)
            pos += len(header)
            if e.size:
                self._starts.append(pos)
                self._parts.append(i)
                pos += e.size
        cd = b"".join(central)
        tail = cd + _end_records(len(self.entries), pos, len(cd), comment)
        self._add(pos, tail)
        self.size = pos + len(tail)

    def _add(self, pos: int, data: bytes) -> None:
        self._starts.append(pos)
        self._parts.append(data)

    def _part_len(self, k: int) -> int:
        part = self._parts[k]
        return self.entries[part].size if isinstance(part, int) else len(part)

    def iter_bytes(
        self, start: int = 0, end: int | None = None, chunk_size: int = CHUNK
    ) -> Iterator[bytes]:
        """Bytes ``[start, end)`` of the zip, reading only the member data in range."""
        end = self.size if end is None else min(end, self.size)
        start = max(0, start)
        if start >= end:
            return
        k = bisect.bisect_right(self._starts, start) - 1
        pos = start
        while pos < end:
            seg_start = self._starts[k]
            seg_len = self._part_len(k)
            lo = pos - seg_start
            hi = min(seg_len, end - seg_start)
            part = self._parts[k]
            if isinstance(part, int):
                yield from self._member_range(self.entries[part], lo, hi - lo, chunk_size)
            else:
                for off in range(lo, hi, chunk_size):
                    yield part[off : min(hi, off + chunk_size)]
            pos = seg_start + hi
            k += 1

    @staticmethod
    def _member_range(e: ZipEntry, offset: int, length: int, chunk_size: int) -> Iterator[bytes]:
        got = 0
        for chunk in e.read_range(offset, length):
            if not chunk:
                continue
            got += len(chunk)
            if got > length:
                raise ValueError(f"read_range of {e.name!r} yielded more than {length} bytes")
            mv = memoryview(chunk)
            for off in range(0, len(chunk), chunk_size):
                yield bytes(mv[off : off + chunk_size])
        if got != length:
            raise ValueError(f"read_range of {e.name!r} yielded {got} bytes, expected {length}")

    def write_to(self, out: BinaryIO, chunk_size: int = CHUNK) -> int:
        """Write the whole zip to ``out``; returns the byte count."""
        n = 0
        for chunk in self.iter_bytes(chunk_size=chunk_size):
            out.write(chunk)
            n += len(chunk)
        return n


class _Counter:
    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.pos = 0

    def write(self, data: bytes) -> None:
        if data:
            self.out.write(data)
            self.pos += len(data)


def write_zip(
    out: BinaryIO,
    members: Iterable[tuple[str, Callable[[], ByteStream], int]],
    chunk_size: int = CHUNK,
) -> int:
    """Stream a zip to ``out`` (need not be seekable); returns bytes written.

    Each member is (name, opener, method) with method 0 Stored, 8 Deflate or 93
    zstd. Sizes and CRCs follow each member in a data descriptor, so nothing is
    buffered beyond one chunk. Output is deterministic for given inputs and
    zlib/zstd library versions (fixed levels, input re-chunked to ``chunk_size``).
    """
    w = _Counter(out)
    central: list[bytes] = []
    names: set[str] = set()
    for name, opener, method in members:
        if name in names:
            raise CartonFormatError(f"duplicate zip entry {name!r}")
        names.add(name)
        raw = _encode_name(name)
        if method not in (STORED, DEFLATED, ZSTD):
            raise CartonFormatError(f"unsupported compression method {method}")
        flags = _FLAG_UTF8 | _FLAG_DESCRIPTOR
        offset = w.pos
        w.write(
            LOCAL_HEADER.pack(
                LOCAL_MAGIC,
                _version_needed(method, False),
                flags,
                method,
                _DOS_TIME,
                _DOS_DATE,
                0,
                0,
                0,
                len(raw),
                0,
            )
            + raw
        )
        crc, size, csize = 0, 0, 0
        comp: Callable[[bytes], bytes]
        flush: Callable[[], bytes]
        if method == DEFLATED:
            zc = zlib.compressobj(DEFLATE_LEVEL, zlib.DEFLATED, -15)
            comp, flush = zc.compress, zc.flush
        elif method == ZSTD:
            zs = ZstdCompressor(options={CompressionParameter.compression_level: ZSTD_LEVEL})
            comp, flush = zs.compress, zs.flush
        with opener() as f:
            while True:
                chunk = read_full(f, chunk_size)
                if not chunk:
                    break
                crc = crc32(chunk, crc)
                size += len(chunk)
                data = chunk if method == STORED else comp(chunk)
                csize += len(data)
                w.write(data)
        if method != STORED:
            data = flush()
            csize += len(data)
            w.write(data)
        if size >= _U32_MAX or csize >= _U32_MAX:
            w.write(struct.pack("<4sLQQ", b"PK\x07\x08", crc, csize, size))
        else:
            w.write(struct.pack("<4s3L", b"PK\x07\x08", crc, csize, size))
        central.append(_central_header(raw, method, flags, crc, csize, size, offset))
    cd_offset = w.pos
    cd = b"".join(central)
    w.write(cd)
    w.write(_end_records(len(central), cd_offset, len(cd), b""))
    return w.pos
