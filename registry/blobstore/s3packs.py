"""Packs on S3: multipart uploads while they are written, ranged GETs read ahead in parallel.

A mixin of ``S3BlobStore``: it uses the store's client, error translation
(``_translate``), key reader (``_open_key``, ``_stat_key``), lister (``_list``)
and thread pool (``_pool``).
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, BinaryIO, Protocol

from registry.blobstore.base import (
    PACK_DIR,
    PackInfo,
    PackWriter,
    is_pack_name,
    pack_key,
)
from registry.blobstore.errors import PackNotFound
from registry.carton.streams import MiB

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import CompletedPartTypeDef

MAX_PARTS = 10_000
PACK_PART_SIZE = 8 * MiB
PARTS_IN_FLIGHT = 2  # per pack being written: the next part fills while these upload
READ_AHEAD_PIECE = 4 * MiB
READS_IN_FLIGHT = 4  # ranged GETs under way per reader: a pull streams at full speed


class _S3Store(Protocol):
    """What the mixin uses of ``S3BlobStore`` (a protocol: how a mixin's ``self`` is typed)."""

    prefix: str
    bucket: str
    client: S3Client

    def pack_key_for(self, name: str) -> str: ...
    def read_pack(self, name: str, start: int, end: int) -> bytes: ...
    def _translate(self, action: str) -> AbstractContextManager[None]: ...
    def _open_key(
        self, key: str, start: int, end: int | None, missing: Callable[[], Exception]
    ) -> BinaryIO: ...
    def _stat_key(self, key: str) -> int | None: ...
    def _list(
        self,
        folder: str,
        canonical: Callable[[str], str],
        valid: Callable[[object], bool],
        what: str,
    ) -> Iterator[tuple[str, int, datetime]]: ...
    def _pool(self) -> ThreadPoolExecutor: ...
    def _abort(self, key: str, upload_id: str) -> None: ...


class S3Packs:
    def pack_key_for(self: _S3Store, name: str) -> str:
        return self.prefix + pack_key(name)

    def new_pack(self: _S3Store, name: str) -> PackWriter:
        return _S3PackWriter(self, name, self.pack_key_for(name))

    def open_pack(self: _S3Store, name: str, start: int = 0, end: int | None = None) -> BinaryIO:
        return self._open_key(self.pack_key_for(name), start, end, lambda: PackNotFound(name))

    def pack_size(self: _S3Store, name: str) -> int | None:
        return self._stat_key(self.pack_key_for(name))

    def iter_packs(self: _S3Store) -> Iterator[PackInfo]:
        for name, size, modified in self._list(PACK_DIR, pack_key, is_pack_name, "packs"):
            yield PackInfo(name, size, modified)

    def delete_pack(self: _S3Store, name: str) -> bool:
        key = self.pack_key_for(name)
        if self._stat_key(key) is None:
            return False
        with self._translate(f"deleting {key}"):
            self.client.delete_object(Bucket=self.bucket, Key=key)
        return True

    def iter_pack_ranges(
        self: _S3Store, ranges: Iterable[tuple[str, int, int]], chunk_size: int = MiB
    ) -> Iterator[bytes]:
        """Ranged GETs of ``READ_AHEAD_PIECE`` bytes, ``READS_IN_FLIGHT`` at once, in order."""
        pieces = (
            (name, at, min(at + READ_AHEAD_PIECE, end))
            for name, start, end in ranges
            for at in range(start, end, READ_AHEAD_PIECE)
        )
        pool = self._pool()
        queue: collections.deque[Future[bytes]] = collections.deque()

        def ready() -> Iterator[bytes]:
            data = queue.popleft().result()
            for at in range(0, len(data), chunk_size):
                yield data[at : at + chunk_size]

        try:
            for piece in pieces:
                queue.append(pool.submit(_read_piece, self, *piece))
                if len(queue) >= READS_IN_FLIGHT:
                    yield from ready()
            while queue:
                yield from ready()
        finally:
            for future in queue:
                future.cancel()


def _read_piece(store: _S3Store, name: str, start: int, end: int) -> bytes:
    data = store.read_pack(name, start, end)
    if len(data) != end - start:
        raise PackNotFound(name)  # shorter than the index says: treated as lost
    return data


class _S3PackWriter(PackWriter):
    """A multipart upload fed part by part; a pack smaller than one part is one PutObject.

    Parts upload in the store's thread pool while the next one fills, at most
    ``PARTS_IN_FLIGHT`` at once, so memory stays at a few parts per writer.
    """

    def __init__(self, store: _S3Store, name: str, key: str) -> None:
        super().__init__(name)
        self._store = store
        self._key = key
        self._buf = bytearray()
        self._upload_id: str | None = None
        self._parts: list[Future[CompletedPartTypeDef]] = []

    def write(self, data: bytes | memoryview) -> None:
        self._buf += data
        self.size += len(data)
        if len(self._buf) >= PACK_PART_SIZE:
            self._send(bytes(self._buf))
            self._buf = bytearray()

    def _send(self, data: bytes) -> None:
        store = self._store
        if self._upload_id is None:
            with store._translate(f"starting a multipart upload of {self._key}"):
                upload = store.client.create_multipart_upload(
                    Bucket=store.bucket, Key=self._key, ContentType="application/octet-stream"
                )
            self._upload_id = upload["UploadId"]
        number = len(self._parts) + 1
        if number > MAX_PARTS:
            raise ValueError(f"pack {self.name} is over {MAX_PARTS} parts")
        pending = [f for f in self._parts if not f.done()]
        if len(pending) >= PARTS_IN_FLIGHT:
            pending[0].result()
        self._parts.append(store._pool().submit(self._upload_part, self._upload_id, number, data))

    def _upload_part(self, upload_id: str, number: int, data: bytes) -> CompletedPartTypeDef:
        store = self._store
        with store._translate(f"uploading part {number} of {self._key}"):
            resp = store.client.upload_part(
                Bucket=store.bucket,
                Key=self._key,
                UploadId=upload_id,
                PartNumber=number,
                Body=data,
                ContentLength=len(data),
            )
        return {"PartNumber": number, "ETag": resp["ETag"]}

    def commit(self) -> None:
        store = self._store
        try:
            if self._upload_id is None:
                with store._translate(f"writing {self._key}"):
                    store.client.put_object(
                        Bucket=store.bucket,
                        Key=self._key,
                        Body=bytes(self._buf),
                        ContentLength=len(self._buf),
                        ContentType="application/octet-stream",
                    )
                self._buf = bytearray()
                return
            if self._buf:
                self._send(bytes(self._buf))
                self._buf = bytearray()
            parts = [f.result() for f in self._parts]
            with store._translate(f"completing the multipart upload of {self._key}"):
                store.client.complete_multipart_upload(
                    Bucket=store.bucket,
                    Key=self._key,
                    UploadId=self._upload_id,
                    MultipartUpload={"Parts": parts},
                )
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        self._buf = bytearray()
        for f in self._parts:
            f.cancel()
        for f in self._parts:
            with contextlib.suppress(Exception):
                f.result()
        if self._upload_id is not None:
            self._store._abort(self._key, self._upload_id)
            self._upload_id = None
