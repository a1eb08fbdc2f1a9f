from __future__ import annotations

import io
import os
import socket
import time
import urllib.request

import pytest

from registry.blobstore import (
    BlobDigestMismatch,
    BlobNotFound,
    BlobStoreUnavailable,
    S3BlobStore,
)
from registry.blobstore.s3packs import PACK_PART_SIZE
from tests import rawstore
from tests.blobstore_conformance import BlobStoreConformance, TrickleStream, sha
from tests.s3server import S3Server

pytestmark = pytest.mark.s3

MiB = 1024 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TestS3BlobStore(BlobStoreConformance):
    # moto's If-None-Match on CompleteMultipartUpload is check-then-act, so racing
    # multipart uploads may each report created=True (one copy still results).
    created_exactly_once = False
    pack_large_size = 2 * PACK_PART_SIZE + 4321  # three parts, the last one short
    # moto lists every multipart upload as initiated in 2010; a real server tells the age.
    upload_ages_known = bool(os.environ.get("REGISTRY_TEST_S3_ENDPOINT"))

    @pytest.fixture
    def store(self, s3_server: S3Server, s3_bucket: str):
        with s3_server.store(s3_bucket, "registry/blobs", part_size=5 * MiB) as store:
            yield store

    def raw_get(self, store: S3BlobStore, key: str) -> bytes | None:
        return rawstore.raw_get(store, key)

    def raw_set(self, store: S3BlobStore, key: str, data: bytes) -> None:
        rawstore.raw_set(store, key, data)

    def incomplete_uploads(self, store: S3BlobStore) -> list[str]:
        return rawstore.incomplete_uploads(store)

    def make_abandoned_upload(self, store: S3BlobStore) -> bool:
        store.client.create_multipart_upload(
            Bucket=store.bucket, Key=store.key_for(sha(b"abandoned"))
        )
        return True

    # -- S3 specifics ------------------------------------------------------------------

    def test_key_layout(self, store: S3BlobStore) -> None:
        data = b"layout"
        h = sha(data)
        store.put_bytes(h, data)
        keys = [
            o["Key"] for o in store.client.list_objects_v2(Bucket=store.bucket).get("Contents", [])
        ]
        assert keys == [f"registry/blobs/sha256/{h[:2]}/{h[2:4]}/{h}"]

    def test_multipart_mismatch_aborts_upload(self, store: S3BlobStore) -> None:
        data = os.urandom(11 * MiB)
        with pytest.raises(BlobDigestMismatch):
            store.put(sha(b"claimed"), TrickleStream(data))
        assert rawstore.incomplete_uploads(store) == []
        assert store.client.list_objects_v2(Bucket=store.bucket).get("KeyCount", 0) == 0

    def test_multipart_stream_error_aborts_upload(self, store: S3BlobStore) -> None:
        class Broken(io.RawIOBase):
            def __init__(self) -> None:
                self.sent = 0

            def readable(self) -> bool:
                return True

            def readinto(self, buf) -> int:  # type: ignore[override]
                if self.sent > 11 * MiB:
                    raise ConnectionResetError("gone")
                n = len(buf)
                buf[:n] = b"\0" * n
                self.sent += n
                return n

        with pytest.raises(ConnectionResetError):
            store.put(sha(b"whatever"), Broken())
        assert rawstore.incomplete_uploads(store) == []
        assert list(store.iter_blobs()) == []

    def test_presigned_get_url(self, s3_server: S3Server, s3_bucket: str) -> None:
        data = b"presigned bytes"
        h = sha(data)
        plain = s3_server.store(s3_bucket)
        assert plain.presigned_get_url(h) is None
        store = s3_server.store(s3_bucket, presign=True)
        store.put_bytes(h, data)
        url = store.presigned_get_url(h, expires=60)
        assert url and url.startswith(s3_server.endpoint_url)
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.read() == data

    def test_prefixes_are_isolated(self, s3_server: S3Server, s3_bucket: str) -> None:
        a = s3_server.store(s3_bucket, "a")
        b = s3_server.store(s3_bucket, "b/")
        a.put_bytes(sha(b"1"), b"1")
        assert not b.exists(sha(b"1"))
        assert list(b.iter_blobs()) == []
        assert [i.sha256 for i in a.iter_blobs()] == [sha(b"1")]

    def test_missing_bucket_is_unavailable(self, s3_server: S3Server) -> None:
        store = s3_server.store("no-such-bucket-for-registry-tests")
        with pytest.raises(BlobStoreUnavailable):
            store.check_available()

    def test_part_size_minimum(self) -> None:
        with pytest.raises(ValueError):
            S3BlobStore("b", part_size=1 * MiB, client=object())


class TestS3Unreachable:
    """A stopped server surfaces as BlobStoreUnavailable, quickly, never a boto error."""

    @pytest.fixture
    def store(self, s3_server: S3Server):  # s3_server sets the AWS_* credentials
        endpoint = f"http://127.0.0.1:{_free_port()}"
        with S3BlobStore("bucket", endpoint_url=endpoint, part_size=5 * MiB) as store:
            yield store

    def test_every_operation(self, store: S3BlobStore) -> None:
        h = sha(b"x")
        started = time.monotonic()
        with pytest.raises(BlobStoreUnavailable, match="cannot reach"):
            store.check_available()
        with pytest.raises(BlobStoreUnavailable):
            store.put_bytes(h, b"x")
        with pytest.raises(BlobStoreUnavailable):
            store.stat(h)
        with pytest.raises(BlobStoreUnavailable):
            store.exists(h)
        with pytest.raises(BlobStoreUnavailable):
            store.open(h)
        with pytest.raises(BlobStoreUnavailable):
            store.delete(h)
        with pytest.raises(BlobStoreUnavailable):
            list(store.iter_blobs())
        with pytest.raises(BlobStoreUnavailable):
            store.clean_stale_uploads(0)
        assert time.monotonic() - started < 60


def test_server_stop_and_restart_keeps_data() -> None:
    """A dedicated moto server: stop() refuses connections, start() brings the data back."""
    if os.environ.get("REGISTRY_TEST_S3_ENDPOINT"):
        pytest.skip("external S3 server: cannot be stopped from the tests")
    from tests.s3server import start_s3_server

    server = start_s3_server()
    try:
        bucket = server.make_bucket()
        store = server.store(bucket, part_size=5 * MiB)
        data = os.urandom(1000)
        store.put_bytes(sha(data), data)
        port = server.port

        server.stop()
        with pytest.raises(BlobStoreUnavailable):
            store.stat(sha(data))
        with pytest.raises(BlobStoreUnavailable):
            store.put(sha(b"y" * (6 * MiB)), io.BytesIO(b"y" * (6 * MiB)))

        server.start()
        assert server.port == port
        assert store.read_bytes(sha(data)) == data
        store.check_available()
        with pytest.raises(BlobNotFound):
            store.open(sha(b"y" * (6 * MiB)))
    finally:
        server.close()
