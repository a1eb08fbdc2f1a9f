"""Reads: one carton, one model, the paginated model list, and references."""

from __future__ import annotations

import pytest

from registry.errors import (
    CartonNotFound,
    InvalidDigest,
    InvalidParameter,
    ModelNotFound,
    TagNotFound,
    VersionNotFound,
)
from registry.services import cartons, models, references, tags
from registry.services.listing import list_models
from tests.conftest import fixture_carton
from tests.helpers import make_carton, sha


def test_carton_metadata_names_files_versions_and_tags(ctx, push) -> None:
    result = push(fixture_carton("02"), tag="stable")
    meta = cartons.get_carton(ctx, result.manifest_sha256)
    assert meta["model_name"] == "selftest_identity"
    assert meta["file_count"] == result.files == len(meta["files"])
    assert meta["bytes_total"] == result.bytes_total
    assert meta["self_tests"] and meta["inputs"]
    assert meta["versions"] == [
        {
            "model_name": "selftest_identity",
            "version": 1,
            "state": "READY",
            "reason": "",
            "tags": ["stable"],
        }
    ]
    with pytest.raises(CartonNotFound):
        cartons.get_carton(ctx, sha(b"no such carton"))
    with pytest.raises(InvalidDigest):
        cartons.get_carton(ctx, "nope")


def test_model_versions_newest_first_with_tags(ctx, push) -> None:
    push(make_carton({"w": b"1"}, model_name="m"))
    second = push(make_carton({"w": b"2"}, model_name="m"), tag="latest")
    model = models.get_model(ctx, "m")
    assert [v["version"] for v in model["versions"]] == [2, 1]
    assert model["tags"] == {"latest": {"version": 2, "manifest_sha256": second.manifest_sha256}}
    with pytest.raises(ModelNotFound):
        models.get_model(ctx, "absent")


@pytest.mark.parametrize("sort", ["name", "recent", "size"])
def test_listing_pages_through_every_model_once(ctx, push, sort: str) -> None:
    for i in range(7):
        push(make_carton({"w": b"x" * (i + 1)}, model_name=f"model-{i}"))
    seen: list[str] = []
    cursor = None
    with ctx.sessions() as session:
        while True:
            page = list_models(session, sort=sort, limit=3, cursor=cursor)
            assert len(page.items) <= 3
            seen += [item["name"] for item in page.items]
            cursor = page.next_cursor
            if cursor is None:
                break
    assert sorted(seen) == [f"model-{i}" for i in range(7)]
    assert len(seen) == len(set(seen))
    if sort == "name":
        assert seen == sorted(seen)
    if sort == "size":
        assert seen[0] == "model-6"


def test_listing_search_and_bad_parameters(ctx, push) -> None:
    push(make_carton({"w": b"1"}, model_name="Res_Net 50"))
    push(make_carton({"w": b"2"}, model_name="resxnet"))
    with ctx.sessions() as session:
        found = [m["name"] for m in list_models(session, q="S_NET").items]
        assert found == ["Res_Net 50"]  # case-insensitive; LIKE's wildcards are literal
        for bad in ({"sort": "weight"}, {"limit": 0}, {"cursor": "!!"}, {"cursor": "WzFd"}):
            with pytest.raises(InvalidParameter):
                list_models(session, **bad)  # type: ignore[arg-type]


def test_references(ctx, push) -> None:
    v1 = push(make_carton({"w": b"1"}, model_name="ref"))
    v2 = push(make_carton({"w": b"2"}, model_name="ref"))
    resolve = references.resolve_ref
    assert resolve(ctx, "ref").manifest_sha256 == v2.manifest_sha256  # highest version
    assert resolve(ctx, "ref:1").manifest_sha256 == v1.manifest_sha256
    tags.put_tag(ctx, "ref", "latest", version=1)
    assert resolve(ctx, "ref").version == 1  # the latest tag wins
    assert resolve(ctx, "ref@latest").version == 1
    assert resolve(ctx, v2.manifest_sha256) == references.Resolved(v2.manifest_sha256, None, None)
    with pytest.raises(VersionNotFound):
        resolve(ctx, "ref:3")
    with pytest.raises(VersionNotFound):
        resolve(ctx, f"ref:{2**40}")
    with pytest.raises(TagNotFound):
        resolve(ctx, "ref@nope")
    with pytest.raises(ModelNotFound):
        resolve(ctx, "other")
    with pytest.raises(CartonNotFound):
        resolve(ctx, sha(b"unknown"))
