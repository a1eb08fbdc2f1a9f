"""Single-blob uploads, the dedup query, and the name/version/digest rules."""

from __future__ import annotations

import io

import pytest

from registry.blobstore import BlobDigestMismatch
from registry.errors import InvalidBody, InvalidDigest, InvalidName, UploadTooLarge
from registry.services.blobs import missing_blobs, put_blob
from registry.services.names import (
    parse_version,
    require_sha256,
    validate_model_name,
    validate_tag_name,
)
from tests.helpers import sha
from tests.rawstore import layout_key, raw_get


def test_put_blob_then_it_is_no_longer_missing(ctx) -> None:
    data = b"uploaded ahead of its carton"
    assert missing_blobs(ctx, [sha(data), sha(data)]) == [sha(data)]
    assert put_blob(ctx, sha(data), io.BytesIO(data)) == {
        "sha256": sha(data),
        "size": len(data),
        "created": True,
        "bytes_stored": len(data),
        "bytes_healed": 0,
    }
    assert raw_get(ctx.blobs, layout_key(sha(data))) == data
    assert missing_blobs(ctx, [sha(data)]) == []
    again = put_blob(ctx, sha(data), io.BytesIO(data))
    assert again["created"] is False and again["bytes_stored"] == 0


def test_a_row_whose_object_was_lost_is_missing_again(ctx) -> None:
    data = b"lost later"
    put_blob(ctx, sha(data), io.BytesIO(data))
    ctx.blobs.delete(sha(data))
    assert missing_blobs(ctx, [sha(data)]) == [sha(data)]


def test_put_blob_refuses_wrong_bytes_bad_names_and_big_bodies(ctx) -> None:
    with pytest.raises(BlobDigestMismatch):
        put_blob(ctx, sha(b"claimed"), io.BytesIO(b"delivered"))
    with pytest.raises(InvalidDigest, match="invalid sha256"):
        put_blob(ctx, "abc", io.BytesIO(b""))
    with pytest.raises(InvalidDigest):
        missing_blobs(ctx, [sha(b"ok"), 42])
    with pytest.raises(InvalidBody, match="hashes per request"):
        missing_blobs(ctx, [sha(b"x")] * 100_001)


@pytest.mark.settings(max_upload_bytes=10)
def test_put_blob_stops_reading_past_the_upload_limit(ctx) -> None:
    data = b"eleven bytes"
    with pytest.raises(UploadTooLarge, match="REGISTRY_MAX_UPLOAD_BYTES"):
        put_blob(ctx, sha(data), io.BytesIO(data))
    assert raw_get(ctx.blobs, layout_key(sha(data))) is None


@pytest.mark.parametrize(
    "name", ["resnet", "Res Net 50", "model-v2.onnx", "ünïcode", "a" * 255, "acme/bert", "a/B 2"]
)
def test_valid_model_names(name: str) -> None:
    assert validate_model_name(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        " lead",
        "trail ",
        "a/b/c",  # one level of namespace
        "Acme/b",  # namespaces are lowercase
        "/b",
        "a/",
        "models/b",  # a top-level route's name
        "acme/diff",  # a route word inside a namespace
        "a\\b",
        "a?b",
        "a#b",
        "a%b",
        "tab\t",
        ".",
        "a" * 256,
    ],
)
def test_invalid_model_names(name: str) -> None:
    with pytest.raises(InvalidName, match=r"invalid (model name|namespace)"):
        validate_model_name(name)


def test_tags_versions_and_digests() -> None:
    assert validate_tag_name("v1.0_rc-2") == "v1.0_rc-2"
    for bad in ("", "-x", ".x", "a b", "x" * 129):
        with pytest.raises(InvalidName):
            validate_tag_name(bad)
    assert (parse_version(None), parse_version(""), parse_version("42")) == (None, None, 42)
    with pytest.raises(InvalidName):
        parse_version("-1")
    assert require_sha256(sha(b"x")) == sha(b"x")
    with pytest.raises(InvalidDigest, match="invalid blob 'ABC'"):
        require_sha256("ABC", "blob")
