"""An in-memory BlobStore (a dict behind a lock), for unit tests."""

from __future__ import annotations

import hashlib
import io
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import BinaryIO

from registry.blobstore.base import (
    BlobInfo,
    BlobStore,
    PackInfo,
    PackWriter,
    PutResult,
    pack_key,
    validate_range,
    validate_sha256,
)
from registry.blobstore.errors import BlobDigestMismatch, BlobNotFound, PackNotFound


class MemoryBlobStore(BlobStore):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blobs: dict[str, tuple[bytes, datetime]] = {}
        self._packs: dict[str, tuple[bytes, datetime]] = {}

    def __repr__(self) -> str:
        return f"MemoryBlobStore({len(self._blobs)} blobs)"

    def put(
        self, sha256: str, stream: BinaryIO, *, size_hint: int | None = None, replace: bool = False
    ) -> PutResult:
        validate_sha256(sha256)
        data = b"".join(iter(lambda: stream.read(self.chunk_size), b""))
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha256:
            raise BlobDigestMismatch(sha256, actual, len(data))
        with self._lock:
            if sha256 in self._blobs and not replace:
                return PutResult(sha256, len(self._blobs[sha256][0]), False)
            self._blobs[sha256] = (data, datetime.now(UTC))
        return PutResult(sha256, len(data), True)

    def _get(self, sha256: str) -> bytes:
        validate_sha256(sha256)
        with self._lock:
            entry = self._blobs.get(sha256)
        if entry is None:
            raise BlobNotFound(sha256)
        return entry[0]

    def open(self, sha256: str, start: int = 0, end: int | None = None) -> BinaryIO:
        validate_range(start, end)
        data = self._get(sha256)
        return io.BytesIO(data[start:end])

    def stat(self, sha256: str) -> int | None:
        validate_sha256(sha256)
        with self._lock:
            entry = self._blobs.get(sha256)
        return None if entry is None else len(entry[0])

    def iter_blobs(self) -> Iterator[BlobInfo]:
        with self._lock:
            items = list(self._blobs.items())
        for sha, (data, modified) in items:
            yield BlobInfo(sha, len(data), modified)

    def delete(self, sha256: str) -> bool:
        validate_sha256(sha256)
        with self._lock:
            return self._blobs.pop(sha256, None) is not None

    # -- packs ---------------------------------------------------------------------

    def new_pack(self, name: str) -> PackWriter:
        pack_key(name)
        return _MemoryPackWriter(self, name)

    def _pack(self, name: str) -> bytes:
        pack_key(name)
        with self._lock:
            entry = self._packs.get(name)
        if entry is None:
            raise PackNotFound(name)
        return entry[0]

    def open_pack(self, name: str, start: int = 0, end: int | None = None) -> BinaryIO:
        validate_range(start, end)
        return io.BytesIO(self._pack(name)[start:end])

    def pack_size(self, name: str) -> int | None:
        pack_key(name)
        with self._lock:
            entry = self._packs.get(name)
        return None if entry is None else len(entry[0])

    def iter_packs(self) -> Iterator[PackInfo]:
        with self._lock:
            items = list(self._packs.items())
        for name, (data, modified) in items:
            yield PackInfo(name, len(data), modified)

    def delete_pack(self, name: str) -> bool:
        pack_key(name)
        with self._lock:
            return self._packs.pop(name, None) is not None

    def clean_stale_uploads(self, older_than_seconds: float) -> int:
        return 0  # uploads are never left half-done in memory

    def check_available(self) -> None:
        return None


class _MemoryPackWriter(PackWriter):
    def __init__(self, store: MemoryBlobStore, name: str) -> None:
        super().__init__(name)
        self._store = store
        self._parts: list[bytes] = []

    def write(self, data: bytes | memoryview) -> None:
        self._parts.append(bytes(data))
        self.size += len(data)

    def commit(self) -> None:
        with self._store._lock:
            self._store._packs[self.name] = (b"".join(self._parts), datetime.now(UTC))
        self._parts = []

    def abort(self) -> None:
        self._parts = []
