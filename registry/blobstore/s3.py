"""The S3-compatible BlobStore (AWS S3, MinIO, moto, ...).

Keys are ``<prefix>sha256/ab/cd/<hex>`` (see ``base``). A put first HEADs the
key: an existing blob wins (the stream is still read and verified). A blob
smaller than ``part_size`` is buffered (at most ``part_size`` bytes), hashed and
written with one ``PutObject`` (``If-None-Match: *`` where supported). A larger
one is a multipart upload straight to the final key, hashed while its parts
stream; it is completed only if the digest matches and aborted otherwise or
on any error, so nothing becomes visible. A ``put(..., replace=True)`` skips
the HEAD and the condition: its verified bytes overwrite the object (one found
damaged). Every connectivity problem
surfaces as ``BlobStoreUnavailable``. Packs (``s3packs``) share the client,
the key reader and the lister.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, BinaryIO

from registry.blobstore.base import (
    BLOB_DIR,
    BlobInfo,
    BlobStore,
    PutResult,
    RangeReader,
    blob_key,
    validate_range,
    validate_sha256,
)
from registry.blobstore.errors import BlobDigestMismatch, BlobNotFound, BlobStoreUnavailable
from registry.blobstore.s3client import (
    error_code,
    http_status,
    is_not_found,
    is_precondition_failed,
    is_unsupported,
    make_client,
    why,
)
from registry.blobstore.s3packs import S3Packs
from registry.carton.digests import is_sha256
from registry.carton.streams import MiB, hash_stream, read_full

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

MIN_PART_SIZE = 5 * MiB
MAX_PARTS = 10_000


class S3BlobStore(S3Packs, BlobStore):
    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        client: S3Client | None = None,
        part_size: int = 16 * MiB,
        presign: bool = False,
        region: str | None = None,
    ) -> None:
        if not bucket:
            raise ValueError("S3BlobStore needs a bucket name")
        if part_size < MIN_PART_SIZE:
            raise ValueError(f"part_size must be at least {MIN_PART_SIZE} bytes (S3's minimum)")
        prefix = prefix.strip("/")
        self.bucket = bucket
        self.prefix = f"{prefix}/" if prefix else ""
        self.endpoint_url = endpoint_url
        self.part_size = part_size
        self.presign = presign
        self._owns_client = client is None
        self.client = client if client is not None else make_client(endpoint_url, region)
        self._if_none_match = True  # cleared when the server rejects the header
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    def _pool(self) -> ThreadPoolExecutor:
        """Threads for pack part uploads and read-ahead, shared by every caller of this store."""
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(8, thread_name_prefix="s3-io")
            return self._executor

    def __repr__(self) -> str:
        where = f" at {self.endpoint_url}" if self.endpoint_url else ""
        return f"S3BlobStore(s3://{self.bucket}/{self.prefix}{where})"

    def key_for(self, sha256: str) -> str:
        return self.prefix + blob_key(validate_sha256(sha256))

    # -- error translation -----------------------------------------------------

    def _unavailable(self, exc: BaseException, action: str) -> BlobStoreUnavailable:
        where = f"s3://{self.bucket}/{self.prefix}"
        if self.endpoint_url:
            where += f" at {self.endpoint_url}"
        return BlobStoreUnavailable(f"blob store {where} unavailable while {action}: {why(exc)}")

    @contextlib.contextmanager
    def _translate(self, action: str) -> Iterator[None]:
        """Turn every botocore / urllib3 failure into BlobStoreUnavailable."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            yield
        except (BotoCoreError, ClientError, OSError) as exc:
            raise self._unavailable(exc, action) from exc
        except Exception as exc:
            # urllib3 errors raised while reading a response body, etc.
            if type(exc).__module__.split(".")[0] in {"urllib3", "botocore", "boto3"}:
                raise self._unavailable(exc, action) from exc
            raise

    # -- writing ---------------------------------------------------------------

    def put(
        self, sha256: str, stream: BinaryIO, *, size_hint: int | None = None, replace: bool = False
    ) -> PutResult:
        key = self.key_for(sha256)
        if not replace and self.stat(sha256) is not None:
            actual, size = hash_stream(stream, self.chunk_size)
            if actual != sha256:
                raise BlobDigestMismatch(sha256, actual, size)
            return PutResult(sha256, size, False)

        h = hashlib.sha256()
        first = read_full(stream, self.part_size)
        h.update(first)
        second = read_full(stream, self.part_size) if len(first) == self.part_size else b""
        if not second:
            actual = h.hexdigest()
            if actual != sha256:
                raise BlobDigestMismatch(sha256, actual, len(first))
            created = self._put_small(key, first, replace)
            return PutResult(sha256, len(first), created)
        return self._put_multipart(sha256, key, stream, h, first, second, replace)

    def _put_small(self, key: str, data: bytes, replace: bool = False) -> bool:
        """PUT the object; unless ``replace``, only where none is (If-None-Match)."""
        kwargs: dict[str, Any] = {
            "Bucket": self.bucket,
            "Key": key,
            "Body": data,
            "ContentLength": len(data),
            "ContentType": "application/octet-stream",
        }
        with self._translate(f"writing {key}"):
            if self._if_none_match and not replace:
                try:
                    self.client.put_object(**kwargs, IfNoneMatch="*")
                    return True
                except Exception as exc:
                    if is_precondition_failed(exc):
                        return False  # written meanwhile: the existing blob wins
                    if not is_unsupported(exc):
                        raise
                    self._if_none_match = False
            self.client.put_object(**kwargs)
            return True

    def _put_multipart(
        self,
        sha256: str,
        key: str,
        stream: BinaryIO,
        h: Any,
        first: bytes,
        second: bytes,
        replace: bool = False,
    ) -> PutResult:
        with self._translate(f"starting a multipart upload of {key}"):
            upload = self.client.create_multipart_upload(
                Bucket=self.bucket, Key=key, ContentType="application/octet-stream"
            )
        upload_id = upload["UploadId"]
        completed = False
        try:
            parts: list[dict[str, Any]] = []
            size = 0

            def send(data: bytes) -> None:
                number = len(parts) + 1
                if number > MAX_PARTS:
                    raise ValueError(
                        f"blob too large for {MAX_PARTS} parts of {self.part_size} bytes"
                    )
                with self._translate(f"uploading part {number} of {key}"):
                    resp = self.client.upload_part(
                        Bucket=self.bucket,
                        Key=key,
                        UploadId=upload_id,
                        PartNumber=number,
                        Body=data,
                        ContentLength=len(data),
                    )
                parts.append({"PartNumber": number, "ETag": resp["ETag"]})

            send(first)
            size += len(first)
            del first
            chunk = second
            while chunk:
                h.update(chunk)
                send(chunk)
                size += len(chunk)
                chunk = read_full(stream, self.part_size)

            actual = h.hexdigest()
            if actual != sha256:
                raise BlobDigestMismatch(sha256, actual, size)
            created = self._complete(key, upload_id, parts, replace)
            completed = created
            return PutResult(sha256, size, created)
        finally:
            if not completed:
                self._abort(key, upload_id)

    def _complete(
        self, key: str, upload_id: str, parts: list[dict[str, Any]], replace: bool = False
    ) -> bool:
        """Complete the upload; unless ``replace``, only where no object is (If-None-Match)."""
        kwargs: dict[str, Any] = {
            "Bucket": self.bucket,
            "Key": key,
            "UploadId": upload_id,
            "MultipartUpload": {"Parts": parts},
        }
        with self._translate(f"completing the multipart upload of {key}"):
            if self._if_none_match and not replace:
                try:
                    self.client.complete_multipart_upload(**kwargs, IfNoneMatch="*")
                    return True
                except Exception as exc:
                    if is_precondition_failed(exc):
                        return False  # the existing blob wins; the caller aborts ours
                    if not is_unsupported(exc):
                        raise
                    self._if_none_match = False
            self.client.complete_multipart_upload(**kwargs)
            return True

    def _abort(self, key: str, upload_id: str) -> None:
        # Best effort: an upload we cannot abort now is collected by clean_stale_uploads.
        with contextlib.suppress(Exception):
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)

    # -- reading ---------------------------------------------------------------

    def open(self, sha256: str, start: int = 0, end: int | None = None) -> BinaryIO:
        return self._open_key(self.key_for(sha256), start, end, lambda: BlobNotFound(sha256))

    def _open_key(
        self, key: str, start: int, end: int | None, missing: Callable[[], Exception]
    ) -> BinaryIO:
        validate_range(start, end)
        if end is not None and end == start:
            if self._stat_key(key) is None:
                raise missing()
            return io.BytesIO(b"")
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if start or end is not None:
            kwargs["Range"] = f"bytes={start}-{'' if end is None else end - 1}"
        with self._translate(f"reading {key}"):
            try:
                resp = self.client.get_object(**kwargs)
            except Exception as exc:
                if is_not_found(exc):
                    raise missing() from None
                if error_code(exc) == "InvalidRange" or http_status(exc) == 416:
                    # start at or past the end of the object: an empty range
                    if self._stat_key(key) is None:
                        raise missing() from None
                    return io.BytesIO(b"")
                raise
        body = resp["Body"]
        limit = None if end is None else end - start
        return RangeReader(  # type: ignore[return-value]  # a RawIOBase, read as a BinaryIO
            body, limit, on_error=lambda exc: self._unavailable(exc, f"reading {key}")
        )

    def stat(self, sha256: str) -> int | None:
        return self._stat_key(self.key_for(sha256))

    def _stat_key(self, key: str) -> int | None:
        with self._translate(f"looking up {key}"):
            try:
                resp = self.client.head_object(Bucket=self.bucket, Key=key)
            except Exception as exc:
                if is_not_found(exc):
                    return None
                raise
        return int(resp["ContentLength"])

    def iter_blobs(self) -> Iterator[BlobInfo]:
        for name, size, modified in self._list(BLOB_DIR, blob_key, is_sha256, "blobs"):
            yield BlobInfo(name, size, modified)

    def _list(
        self,
        folder: str,
        canonical: Callable[[str], str],
        valid: Callable[[object], bool],
        what: str,
    ) -> Iterator[tuple[str, int, datetime]]:
        """(name, size, modified) of every object under ``folder`` at its canonical key."""
        paginator = self.client.get_paginator("list_objects_v2")
        it = iter(paginator.paginate(Bucket=self.bucket, Prefix=f"{self.prefix}{folder}/"))
        while True:
            with self._translate(f"listing {what}"):
                page = next(it, None)
            if page is None:
                return
            for obj in page.get("Contents", []):
                key: str = obj["Key"]
                name = key.rsplit("/", 1)[-1]
                if not valid(name) or key != self.prefix + canonical(name):
                    continue
                modified = obj["LastModified"]
                if modified.tzinfo is None:
                    modified = modified.replace(tzinfo=UTC)
                yield name, int(obj["Size"]), modified.astimezone(UTC)

    # -- deleting / maintenance -----------------------------------------------

    def delete(self, sha256: str) -> bool:
        if self.stat(sha256) is None:
            return False
        key = self.key_for(sha256)
        with self._translate(f"deleting {key}"):
            self.client.delete_object(Bucket=self.bucket, Key=key)
        return True

    def clean_stale_uploads(self, older_than_seconds: float) -> int:
        cutoff = datetime.now(UTC) - timedelta(seconds=older_than_seconds)
        removed = 0
        paginator = self.client.get_paginator("list_multipart_uploads")
        it = iter(paginator.paginate(Bucket=self.bucket, Prefix=self.prefix))
        while True:
            with self._translate("listing incomplete uploads"):
                page = next(it, None)
            if page is None:
                break
            for upload in page.get("Uploads", []):
                initiated = upload.get("Initiated")
                if initiated is not None and initiated.tzinfo is None:
                    initiated = initiated.replace(tzinfo=UTC)
                if initiated is not None and initiated > cutoff:
                    continue
                with self._translate(f"aborting the upload of {upload['Key']}"):
                    try:
                        self.client.abort_multipart_upload(
                            Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                        )
                    except Exception as exc:
                        if error_code(exc) == "NoSuchUpload" or is_not_found(exc):
                            continue  # finished or aborted meanwhile
                        raise
                removed += 1
        return removed

    # -- serving helpers -------------------------------------------------------

    def presigned_get_url(self, sha256: str, expires: int = 300) -> str | None:
        if not self.presign:
            return None
        key = self.key_for(sha256)
        with self._translate(f"presigning {key}"):
            return self.client.generate_presigned_url(
                "get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=expires
            )

    # -- lifecycle -------------------------------------------------------------

    def check_available(self) -> None:
        with self._translate("checking the bucket"):
            self.client.head_bucket(Bucket=self.bucket)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        if self._owns_client:
            with contextlib.suppress(Exception):
                self.client.close()
