"""The BlobStore interface: immutable blobs named by the sha256 of their bytes.

Key layout (the same for every backend, under the filesystem root or the S3
``bucket/prefix``)::

    sha256/ab/cd/abcd0123...<64 lowercase hex>   a published blob (final name)
    packs/ab/ab01...<32 lowercase hex>           a pack: chunks back to back (name is random)
    tmp/<sha256>.<random>.tmp                    an upload in progress (filesystem)
    tmp/pack-<name>.<random>.tmp                 a pack being written (filesystem)

``ab`` and ``cd`` are the first two and the next two hex digits of the digest.
A blob is published under its final name only once its bytes have been hashed
and found equal to the name, and atomically: nobody ever sees a half-written
blob under a final name. An existing blob always wins over a concurrent or
later writer of the same digest (the bytes are identical by construction),
except a ``put(..., replace=True)``: the index found the stored object
damaged, and the verified bytes take its place.
The S3 backend writes no temp objects: large blobs are multipart uploads to the
final key, invisible until completed; incomplete ones are what
``clean_stale_uploads`` aborts.

Packs hold content-defined chunks of large files (docs/chunk-store.md); which
bytes of which pack make up a file is the index's business, not the store's. A
pack is written by one ``PackWriter`` (appends, then ``commit`` publishes it
atomically, ``abort`` leaves nothing visible) and never changes afterwards.

Ranges are half-open: ``open(sha, start, end)`` yields bytes ``[start, end)``;
``end=None`` means to the end of the blob. Ranges reaching past the end of the
blob are clamped (a range starting at or beyond the end is empty);
``start < 0`` or ``end < start`` is a ``ValueError``.
"""

from __future__ import annotations

import abc
import io
import re
import secrets
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import BinaryIO, Protocol

from registry.blobstore.errors import PackNotFound
from registry.carton.digests import is_sha256
from registry.carton.streams import CHUNK, Readable, ReadStream, read_full

BLOB_DIR = "sha256"
PACK_DIR = "packs"
TMP_DIR = "tmp"

_PACK_NAME_RE = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class BlobInfo:
    sha256: str
    size: int
    modified: datetime  # timezone-aware, UTC


@dataclass(frozen=True)
class PackInfo:
    name: str
    size: int
    modified: datetime  # timezone-aware, UTC


@dataclass(frozen=True)
class PutResult:
    sha256: str
    size: int
    created: bool  # False when the blob already existed (the existing blob wins)
    # (with ``put(..., replace=True)`` always True: the object was written)


def validate_sha256(sha256: object) -> str:
    """Return ``sha256`` if it is 64 lowercase hex digits, else raise ``ValueError``."""
    if not is_sha256(sha256):
        raise ValueError(f"not a sha256 digest (64 lowercase hex digits): {sha256!r}")
    return sha256


def blob_key(sha256: str) -> str:
    """The key of a blob relative to the store root: ``sha256/ab/cd/<hex>``."""
    return f"{BLOB_DIR}/{sha256[0:2]}/{sha256[2:4]}/{sha256}"


def new_pack_name() -> str:
    """A fresh pack name: 32 random hex digits (S3 needs the key before the first byte)."""
    return secrets.token_hex(16)


def is_pack_name(value: object) -> bool:
    return isinstance(value, str) and _PACK_NAME_RE.match(value) is not None


def pack_key(name: str) -> str:
    """The key of a pack relative to the store root: ``packs/ab/<name>``."""
    if not is_pack_name(name):
        raise ValueError(f"not a pack name (32 lowercase hex digits): {name!r}")
    return f"{PACK_DIR}/{name[0:2]}/{name}"


def validate_range(start: int, end: int | None) -> None:
    if start < 0:
        raise ValueError(f"range start must be >= 0, not {start}")
    if end is not None and end < start:
        raise ValueError(f"range end ({end}) is before its start ({start})")


class ClosableReader(Readable, Protocol):
    """What ``RangeReader`` wraps: a file or a botocore ``StreamingBody``."""

    def close(self) -> None: ...


class RangeReader(ReadStream):
    """A read-only stream over at most ``limit`` bytes of another stream.

    ``limit=None`` reads to EOF. ``on_error`` may translate exceptions raised by
    the underlying stream (e.g. network errors into ``BlobStoreUnavailable``).
    """

    def __init__(
        self,
        raw: ClosableReader,
        limit: int | None,
        on_error: Callable[[Exception], Exception] | None = None,
    ) -> None:
        super().__init__()
        self._raw = raw
        self._remaining = limit
        self._on_error = on_error

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        """The underlying stream's bytes as they are: RawIOBase's ``read`` would copy them
        twice more, through ``readinto`` and back (a third of a read-back's CPU)."""
        if self._remaining is None:
            want = None if size is None or size < 0 else size
        else:
            want = self._remaining if size is None or size < 0 else min(size, self._remaining)
            if want <= 0:
                return b""
        try:
            data = self._raw.read(want) if want is not None else self._raw.read()
        except Exception as exc:
            if self._on_error is None:
                raise
            raise self._on_error(exc) from exc
        if self._remaining is not None:
            self._remaining -= len(data)
        return data

    def close(self) -> None:
        if not self.closed:
            try:
                self._raw.close()
            finally:
                super().close()


class PackWriter(abc.ABC):
    """One pack being written: ``write`` appends, ``commit`` publishes, ``abort`` discards."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.size = 0

    @abc.abstractmethod
    def write(self, data: bytes | memoryview) -> None:
        """Append ``data``, which must not change afterwards: a writer may hold it (up to
        one part's worth) before it goes out."""

    @abc.abstractmethod
    def commit(self) -> None:
        """Make the pack durable and visible under its key; nothing else may be written."""

    @abc.abstractmethod
    def abort(self) -> None:
        """Discard what was written (best effort; stale uploads are cleaned later)."""


class BlobStore(abc.ABC):
    """Content-addressed, immutable blob storage (see the module docstring)."""

    chunk_size: int = CHUNK
    parallel_pack_reads: bool = False
    """``read_pack`` is a local read, cheap to call once per MiB from several threads at
    once (verified reads then read and hash groups in parallel); False: read packs as
    one ``iter_pack_ranges`` stream, which a remote store reads ahead."""

    # -- writing ---------------------------------------------------------------

    @abc.abstractmethod
    def put(
        self, sha256: str, stream: BinaryIO, *, size_hint: int | None = None, replace: bool = False
    ) -> PutResult:
        """Store the bytes of ``stream`` (read to EOF) under ``sha256``.

        Published atomically and only if the bytes hash to ``sha256``; otherwise
        ``BlobDigestMismatch`` and nothing is left behind (an existing object stays as
        it was). If the blob exists already, the stream is still read and verified, and
        ``created`` is False, unless ``replace``: then the verified bytes atomically
        take the place of the stored object, whatever it holds (a copy found damaged),
        and ``created`` is True.
        """

    def put_bytes(self, sha256: str, data: bytes) -> PutResult:
        return self.put(sha256, io.BytesIO(data), size_hint=len(data))

    # -- reading ---------------------------------------------------------------

    @abc.abstractmethod
    def open(self, sha256: str, start: int = 0, end: int | None = None) -> BinaryIO:
        """A readable stream of bytes ``[start, end)``. ``BlobNotFound`` if absent."""

    def iter_chunks(
        self,
        sha256: str,
        start: int = 0,
        end: int | None = None,
        chunk_size: int = CHUNK,
    ) -> Iterator[bytes]:
        with self.open(sha256, start, end) as f:
            while True:
                data = f.read(chunk_size)
                if not data:
                    return
                yield data

    def read_bytes(self, sha256: str, start: int = 0, end: int | None = None) -> bytes:
        """The whole blob (or range) in memory; for small blobs and tests."""
        return b"".join(self.iter_chunks(sha256, start, end))

    @abc.abstractmethod
    def stat(self, sha256: str) -> int | None:
        """The size of the blob, or None if absent."""

    def exists(self, sha256: str) -> bool:
        return self.stat(sha256) is not None

    def exists_many(self, hashes: Iterable[str]) -> set[str]:
        """The subset of ``hashes`` that are stored."""
        return {h for h in set(hashes) if self.exists(h)}

    @abc.abstractmethod
    def iter_blobs(self) -> Iterator[BlobInfo]:
        """Every stored blob (order unspecified)."""

    # -- deleting / maintenance -----------------------------------------------

    @abc.abstractmethod
    def delete(self, sha256: str) -> bool:
        """Delete the blob; True if something was deleted."""

    @abc.abstractmethod
    def clean_stale_uploads(self, older_than_seconds: float) -> int:
        """Remove temp files / incomplete uploads older than that; return how many."""

    # -- serving helpers -------------------------------------------------------

    def presigned_get_url(self, sha256: str, expires: int = 300) -> str | None:
        """A URL a client can GET the blob from directly, or None (unsupported)."""
        return None

    # -- packs ---------------------------------------------------------------------

    @abc.abstractmethod
    def new_pack(self, name: str) -> PackWriter:
        """Start writing the pack ``name`` (from ``new_pack_name``)."""

    @abc.abstractmethod
    def open_pack(self, name: str, start: int = 0, end: int | None = None) -> BinaryIO:
        """A readable stream of the pack's bytes ``[start, end)``; ``BlobNotFound`` if absent."""

    def read_pack(self, name: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of a pack, exactly (short only if the pack is shorter)."""
        with self.open_pack(name, start, end) as f:
            return read_full(f, end - start)

    def iter_pack_ranges(
        self, ranges: Iterable[tuple[str, int, int]], chunk_size: int = CHUNK
    ) -> Iterator[bytes]:
        """The bytes of every (pack, start, end) range in turn; backends may read ahead.

        The ranges come from the index: a pack shorter than one of them lost data, and
        is ``PackNotFound`` as a missing one is (never a short read).
        """
        for name, start, end in ranges:
            with self.open_pack(name, start, end) as f:
                remaining = end - start
                while remaining > 0:
                    data = f.read(min(chunk_size, remaining))
                    if not data:
                        raise PackNotFound(name)
                    remaining -= len(data)
                    yield data

    @abc.abstractmethod
    def pack_size(self, name: str) -> int | None:
        """The size of the pack, or None if absent."""

    @abc.abstractmethod
    def iter_packs(self) -> Iterator[PackInfo]:
        """Every stored pack (order unspecified)."""

    @abc.abstractmethod
    def delete_pack(self, name: str) -> bool:
        """Delete the pack; True if something was deleted."""

    # -- lifecycle -------------------------------------------------------------

    @abc.abstractmethod
    def check_available(self) -> None:
        """Raise ``BlobStoreUnavailable`` if the backend cannot be reached or written."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (connections, ...)."""

    def __enter__(self) -> BlobStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
