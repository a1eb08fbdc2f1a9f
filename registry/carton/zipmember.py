"""One zip member read forward from a stream: decompressed, counted and verified.

Part of the single-pass reader (``zipstream``): ``ForwardInput`` hands out the
archive's bytes exactly once; ``StreamEntry`` is one local entry, a readable
stream of its uncompressed bytes whose size and CRC-32 are checked against its
local header or data descriptor when it ends (see ``zipstream`` for the
descriptor search of Stored members).
"""

from __future__ import annotations

import io
import re
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from .errors import CartonFormatError, CartonLimitExceeded
from .paths import LINKS_NAME, MANIFEST_NAME
from .streams import MiB, Readable, ReadStream, crc32
from .zipchecks import MAX_SYMLINK_BYTES
from .zipformat import DEFLATED, LOCAL_MAGIC, STORED, ZSTD
from .zstdmember import ZstdMemberDecoder

CENTRAL_MAGIC = b"PK\x01\x02"
DESCRIPTOR_MAGIC = b"PK\x07\x08"
_DESCRIPTOR_SEARCH = re.compile(re.escape(DESCRIPTOR_MAGIC))  # re's literal scan: 1.7x bytes.find
FLAG_DESCRIPTOR = 0x08
READ = MiB


class ForwardInput:
    """Forward-only reads over the source with exact lengths and a known offset."""

    def __init__(self, source: Readable) -> None:
        self._source = source
        self._buf = b""
        self._at = 0
        self.offset = 0  # of the next byte handed out

    def _more(self, want: int) -> bool:
        data = self._source.read(max(want, READ))
        if not data:
            return False
        self._buf = self._buf[self._at :] + data if self._at < len(self._buf) else bytes(data)
        self._at = 0
        return True

    def peek(self, n: int) -> bytes:
        while len(self._buf) - self._at < n:
            if not self._more(n - (len(self._buf) - self._at)):
                break
        return self._buf[self._at : self._at + n]

    def read_some(self, n: int) -> bytes:
        """Up to ``n`` bytes (at least one unless the source is exhausted)."""
        if self._at >= len(self._buf):
            data = self._source.read(n)
            if not data:
                return b""
            if len(data) > n:  # a source may hand out more than asked
                self._buf, self._at = bytes(data), n
                data = data[:n]
            self.offset += len(data)
            return bytes(data)
        if self._at == 0 and n >= len(self._buf):
            out = self._buf  # the piece as it came: no copy
        else:
            out = self._buf[self._at : self._at + n]
        self._at += len(out)
        self.offset += len(out)
        return out

    def window(self) -> bytes:
        """The bytes read ahead and not handed out yet (a new piece when there are none;
        b"" at the end): the received piece itself while none of it was handed out."""
        if self._at >= len(self._buf) and not self._more(1):
            return b""
        if self._at:
            self._buf, self._at = self._buf[self._at :], 0
        return self._buf

    def skip(self, n: int) -> None:
        """Hand out the first ``n`` bytes of ``window()`` (the caller already has them)."""
        self._at += n
        self.offset += n

    def read_exact(self, n: int, what: str) -> bytes:
        data = self.peek(n)
        if len(data) != n:
            raise CartonFormatError(f"truncated zip archive: it ends inside {what}")
        self._at += n
        self.offset += n
        return data

    def unread(self, data: bytes) -> None:
        """Give back bytes read past the end of a compressed stream."""
        if data:
            self._buf = bytes(data) + self._buf[self._at :]
            self._at = 0
            self.offset -= len(data)

    def rest(self, limit: int, what: str) -> bytes:
        """Everything left, refusing more than ``limit`` bytes."""
        parts = [self._buf[self._at :]]
        total = len(parts[0])
        self._buf, self._at = b"", 0
        while total <= limit:
            data = self._source.read(READ)
            if not data:
                break
            parts.append(bytes(data))
            total += len(data)
        if total > limit:
            raise CartonLimitExceeded(f"{what} is larger than the limit of {limit} bytes")
        self.offset += total
        return b"".join(parts)


@dataclass(eq=False)
class StreamEntry(ReadStream):
    """One local entry; a readable stream of its uncompressed bytes, verified at its end.

    ``size`` and ``crc32`` are the values seen (final once the entry was read to EOF).
    """

    path: str
    raw_name: bytes
    flags: int
    method: int
    header_offset: int
    declared_crc32: int | None
    declared_size: int | None
    declared_compressed_size: int | None
    size: int = 0
    crc32: int = 0
    compressed_size: int = 0
    done: bool = False
    captured: bytes | None = field(default=None, repr=False)
    _reader: MemberStream | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        io.RawIOBase.__init__(self)

    @property
    def is_dir(self) -> bool:
        return self.path.endswith("/")

    def readable(self) -> bool:
        return True

    def read(self, n: int | None = -1) -> bytes:
        reader = self._reader
        assert reader is not None
        if n is None or n < 0:
            return b"".join(iter(lambda: reader.next(READ), b""))
        return reader.next(n) if n else b""

    def drain(self) -> None:
        while self.read(READ):
            pass


class MemberStream:
    """Decompresses one member from the input and checks it against what it declares."""

    def __init__(
        self,
        entry: StreamEntry,
        source: ForwardInput,
        account: Callable[[StreamEntry, int], None],
        capture_limit: int,
    ) -> None:
        self.entry = entry
        self._in = source
        self._account_to = account
        self._capture_limit = capture_limit
        self._method = entry.method
        self._zlib = zlib.decompressobj(-15) if self._method == DEFLATED else None
        self._left = (
            entry.declared_compressed_size
            if not entry.flags & FLAG_DESCRIPTOR
            else None  # unknown: the compressed stream (or a descriptor) says where it ends
        )
        self._zstd = (
            ZstdMemberDecoder(
                lambda: self._compressed(READ),
                self._fail,
                # Sizes follow in a descriptor: one frame, whatever follows is not ours.
                give_back=self._give_back if self._left is None else None,
            )
            if self._method == ZSTD
            else None
        )
        self._capture: list[bytes] | None = [] if self._small_enough() else None

    def _small_enough(self) -> bool:
        e = self.entry
        if e.path in (MANIFEST_NAME, LINKS_NAME):
            return True
        return e.declared_size is not None and e.declared_size <= MAX_SYMLINK_BYTES

    def _fail(self, what: str) -> CartonFormatError:
        return CartonFormatError(f"{self.entry.path}: {what}")

    def _compressed(self, n: int) -> bytes:
        if self._left is not None:
            n = min(n, self._left)
            if n <= 0:
                return b""
        data = self._in.read_some(n)
        if self._left is not None:
            if not data:
                raise CartonFormatError(
                    f"truncated zip archive: it ends inside the data of {self.entry.path}"
                )
            self._left -= len(data)
        self.entry.compressed_size += len(data)
        return data

    def next(self, n: int) -> bytes:
        """Up to ``n`` more uncompressed bytes; b"" only at the verified end of the member."""
        if self.entry.done:
            return b""
        while True:
            data = self._step(n)
            if data is None:
                self._finish()
                return b""
            if data:
                self._account(data)
                return data

    def _step(self, n: int) -> bytes | None:
        """Some uncompressed bytes (maybe b""), or None at the end of the compressed stream."""
        if self._method == STORED:
            if self._left is not None:
                return self._compressed(n) or None
            return self._stored_until_descriptor(n)
        if self._method == DEFLATED:
            d = self._zlib
            assert d is not None
            if d.eof:
                self._in.unread(d.unused_data)
                self.entry.compressed_size -= len(d.unused_data)
                return None
            if d.unconsumed_tail:
                return d.decompress(d.unconsumed_tail, n)
            chunk = self._compressed(READ)
            if not chunk:
                raise self._fail("deflate stream is truncated")
            try:
                return d.decompress(chunk, n)
            except zlib.error as exc:
                raise self._fail(f"corrupt deflate data ({exc})") from None
        assert self._zstd is not None
        return self._zstd.step(n)

    def _give_back(self, data: bytes) -> None:
        """Bytes read past the member's data: the archive's, read again next."""
        self._in.unread(data)
        self.entry.compressed_size -= len(data)

    def _stored_until_descriptor(self, n: int) -> bytes | None:
        """Stored bytes up to the data descriptor that matches what was seen (module doc).

        Each byte is searched once, and a piece with no signature in it (nearly all)
        is handed on as it came, without a copy.
        """
        source = self._in
        while True:
            window = source.window()
            if not window:
                raise CartonFormatError(
                    f"truncated zip archive: it ends inside the data of {self.entry.path}"
                )
            found = _DESCRIPTOR_SEARCH.search(window)
            if found is None:
                cut = len(window) - _signature_start_at_end(window)
                if cut == 0:  # only the start of a signature so far: it needs what follows
                    if len(source.peek(len(window) + 1)) <= len(window):
                        raise CartonFormatError(
                            f"truncated zip archive: it ends inside the data of {self.entry.path}"
                        )
                    continue
            elif found.start() > 0:
                cut = found.start()
            else:
                if _descriptor_matches(source.peek(24), self.entry.crc32, self.entry.size):
                    return None  # the descriptor stays in the input for ``_read_descriptor``
                window = source.window()  # peek may have read more
                following = _DESCRIPTOR_SEARCH.search(window, 1)
                cut = (
                    following.start()
                    if following is not None
                    else max(1, len(window) - _signature_start_at_end(window))
                )
            cut = min(cut, n)
            out = window if cut == len(window) else window[:cut]
            source.skip(cut)
            self.entry.compressed_size += cut
            return out

    def _account(self, data: bytes) -> None:
        e = self.entry
        e.size += len(data)
        e.crc32 = crc32(data, e.crc32)
        if e.declared_size is not None and e.size > e.declared_size:
            raise self._fail(f"inflates past its declared size of {e.declared_size} bytes")
        self._account_to(e, len(data))
        if self._capture is not None:
            self._capture.append(data)
            if e.size > self._capture_limit:
                self._capture = None

    def _finish(self) -> None:
        e = self.entry
        if e.flags & FLAG_DESCRIPTOR:
            self._read_descriptor()
        elif self._method != STORED and self._left:
            raise self._fail("compressed data ends before its declared compressed size")
        if e.declared_size is not None and e.size != e.declared_size:
            raise self._fail(f"holds {e.size} bytes but its header declares {e.declared_size}")
        if e.declared_crc32 is not None and e.crc32 != e.declared_crc32:
            raise self._fail(
                f"CRC-32 mismatch (got {e.crc32:08x}, header says {e.declared_crc32:08x})"
            )
        if e.declared_compressed_size is not None and e.compressed_size != (
            e.declared_compressed_size
        ):
            raise self._fail(
                f"holds {e.compressed_size} compressed bytes but its header declares "
                f"{e.declared_compressed_size}"
            )
        e.done = True
        if self._capture is not None:
            e.captured = b"".join(self._capture)

    def _read_descriptor(self) -> None:
        """Sizes and CRC after the data: optional signature, 32- or 64-bit sizes."""
        e = self.entry
        head = self._in.peek(24)
        if not head.startswith(DESCRIPTOR_MAGIC):
            head = DESCRIPTOR_MAGIC + self._in.peek(20)
            skip = -4
        else:
            skip = 0
        for width, fmt in ((24, "<4sLQQ"), (16, "<4s3L")):
            if len(head) < width:
                continue
            _, crc, csize, size = struct.unpack(fmt, head[:width])
            if crc == e.crc32 and csize == e.compressed_size and size == e.size:
                nxt = self._in.peek(width + skip + 4)[width + skip :]
                if width == 16 and nxt not in (LOCAL_MAGIC, CENTRAL_MAGIC, b""):
                    continue  # a 64-bit descriptor whose high words happen to be zero
                self._in.read_exact(width + skip, f"{e.path}'s data descriptor")
                e.declared_crc32, e.declared_size, e.declared_compressed_size = crc, size, csize
                return
        raise self._fail("data descriptor does not match the member's bytes")


def _signature_start_at_end(data: bytes) -> int:
    """How many of the last bytes of ``data`` (up to 3) could begin a descriptor signature."""
    for k in (3, 2, 1):
        if data.endswith(DESCRIPTOR_MAGIC[:k]):
            return k
    return 0


def _descriptor_matches(candidate: bytes, crc: int, size: int) -> bool:
    for fmt in ("<4sLQQ", "<4s3L"):
        width = struct.calcsize(fmt)
        if len(candidate) >= width:
            _, d_crc, csize, usize = struct.unpack(fmt, candidate[:width])
            if d_crc == crc and csize == size and usize == size:
                return True
    return False
