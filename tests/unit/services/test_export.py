"""Rebuilt cartons: laid out from the index, byte-deterministic, any range, slim or full."""

from __future__ import annotations

import pytest

from registry.blobstore import BlobNotFound
from registry.errors import CartonNotFound, InvalidDigest, InvalidParameter
from registry.services import cartons, deletes
from registry.services.export import build_carton
from registry.services.stored_blobs import stored_blob
from tests.conftest import fixture_carton
from tests.helpers import check_full, check_slim, make_carton, sha

BIG = b"weights " * 10_000  # over the default inline threshold


def _bytes(exported) -> bytes:  # type: ignore[no-untyped-def]
    return b"".join(exported.iter_bytes())


def _sizes(ctx, manifest_sha256: str) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return {f["path"]: f["size"] for f in cartons.get_carton(ctx, manifest_sha256)["files"]}


def test_full_and_slim_forms(ctx, push) -> None:
    result = push(
        make_carton({"w/big": BIG, "w/small": b"tiny"}, model_name="m", tensor_index=True)
    )
    manifest = result.manifest_sha256

    full = build_carton(ctx, manifest, "full")
    check_full(_bytes(full), manifest)
    assert full.size == len(_bytes(full))
    assert full.linked == {}

    slim = build_carton(ctx, manifest)
    settings = ctx.settings
    links = check_slim(
        _bytes(slim),
        manifest,
        _sizes(ctx, manifest),
        settings.slim_inline_max_bytes,
        settings.public_url,
    )
    assert set(links) == {sha(BIG)} and slim.linked == {sha(BIG): len(BIG)}
    assert slim.etag != full.etag
    assert slim.filename.startswith("m-") and full.filename.endswith("-full.carton")


def test_the_same_inputs_give_the_same_bytes_and_any_range(ctx, push) -> None:
    manifest = push(fixture_carton("02")).manifest_sha256
    first = _bytes(build_carton(ctx, manifest, "full"))
    ctx.caches.facts.cartons.drop((manifest, "full"))  # lay it out again from the index
    again = build_carton(ctx, manifest, "full")
    assert _bytes(again) == first
    for start, end in ((0, 1), (10, 500), (len(first) - 7, None), (len(first), None)):
        assert b"".join(again.iter_bytes(start, end)) == first[start:end]


def test_layouts_are_cached_per_context_but_deletes_show_at_once(ctx, push) -> None:
    result = push(make_carton({"w": b"gone soon"}, model_name="doomed"))
    manifest = result.manifest_sha256
    assert build_carton(ctx, manifest) is build_carton(ctx, manifest)
    deletes.delete_version(ctx, "doomed", 1)
    with pytest.raises(CartonNotFound):
        build_carton(ctx, manifest)


def test_small_blobs_are_served_from_the_context_cache(ctx, push) -> None:
    manifest = push(make_carton({"w/small": b"inline me"}, model_name="m")).manifest_sha256
    body = _bytes(build_carton(ctx, manifest, "full"))
    assert ctx.caches.facts.small_blobs.get(sha(b"inline me")) == b"inline me"
    ctx.blobs.delete(sha(b"inline me"))  # behind the index's back: the cache still answers
    ctx.caches.facts.cartons.drop((manifest, "full"))
    assert _bytes(build_carton(ctx, manifest, "full")) == body


def test_bad_requests(ctx) -> None:
    with pytest.raises(InvalidDigest, match="invalid manifest hash"):
        build_carton(ctx, "not-a-hash")
    with pytest.raises(InvalidParameter, match="'slim' or 'full'"):
        build_carton(ctx, sha(b"x"), "medium")
    with pytest.raises(CartonNotFound):
        build_carton(ctx, sha(b"never pushed"))


def test_blob_size_from_the_index_else_the_store(ctx, push) -> None:
    push(make_carton({"w": BIG}, model_name="m"))
    assert stored_blob(ctx, sha(BIG)).size == len(BIG)
    ctx.blobs.put_bytes(sha(b"store only"), b"store only")
    assert stored_blob(ctx, sha(b"store only")).size == len(b"store only")
    with pytest.raises(BlobNotFound):
        stored_blob(ctx, sha(b"absent"))
    with pytest.raises(InvalidDigest):
        stored_blob(ctx, "ABC")
