from __future__ import annotations

from pathlib import Path

import pytest

from registry.blobstore import (
    FilesystemBlobStore,
    MemoryBlobStore,
    S3BlobStore,
    open_blobstore,
)
from registry.settings import Settings


def test_default_is_filesystem_under_data_dir(tmp_path: Path) -> None:
    store = open_blobstore(Settings(data_dir=tmp_path))
    assert isinstance(store, FilesystemBlobStore)
    assert store.root == (tmp_path / "blobs").resolve()


@pytest.mark.parametrize(
    "url, expected",
    [
        ("file:///srv/blobs", Path("/srv/blobs")),
        ("file://relative/blobs", Path.cwd() / "relative/blobs"),
        ("/plain/path", Path("/plain/path")),
        ("plain/rel", Path.cwd() / "plain/rel"),
    ],
)
def test_file_urls(url: str, expected: Path) -> None:
    store = open_blobstore(Settings(blob_store=url))
    assert isinstance(store, FilesystemBlobStore)
    assert store.root == expected


def test_memory() -> None:
    assert isinstance(open_blobstore(Settings(blob_store="memory://")), MemoryBlobStore)


def test_s3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    settings = Settings(
        blob_store="s3://my-bucket/some/prefix/",
        s3_endpoint_url="http://127.0.0.1:9000",
        s3_presign_downloads=True,
    )
    store = open_blobstore(settings)
    assert isinstance(store, S3BlobStore)
    assert store.bucket == "my-bucket"
    assert store.prefix == "some/prefix/"
    assert store.endpoint_url == "http://127.0.0.1:9000"
    assert store.presign is True
    assert store.key_for("a" * 64) == "some/prefix/sha256/aa/aa/" + "a" * 64
    bare = open_blobstore(Settings(blob_store="s3://b2"))
    assert bare.prefix == ""
    assert bare.presign is False
    assert bare.presigned_get_url("a" * 64) is None
    store.close()
    bare.close()


def test_s3_region_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    store = open_blobstore(Settings(blob_store="s3://b/p?region=eu-west-3"))
    assert store.client.meta.region_name == "eu-west-3"


@pytest.mark.parametrize(
    "url", ["ftp://host/x", "s3://", "s3:///prefix", "gs://bucket", "file://", "s3://b/p?x=1"]
)
def test_bad_urls(url: str) -> None:
    with pytest.raises(ValueError, match="REGISTRY_BLOB_STORE"):
        open_blobstore(Settings(blob_store=url))
