"""Tags (with compare-and-swap) and deletes (at once from the index; bytes at the next GC)."""

from __future__ import annotations

import pytest

from registry.errors import (
    CartonNotFound,
    InvalidBody,
    InvalidDigest,
    InvalidName,
    ModelNotFound,
    TagMoved,
    TagNotFound,
    VersionNotFound,
)
from registry.services import cartons, deletes, models, tags
from registry.services.listing import list_models
from tests.helpers import make_carton, referenced, sha, stored


@pytest.fixture
def two_versions(push):  # type: ignore[no-untyped-def]
    return push(make_carton({"w": b"1"}, model_name="m")), push(
        make_carton({"w": b"2"}, model_name="m")
    )


def test_put_tag_by_version_or_manifest(ctx, two_versions) -> None:
    v1, v2 = two_versions
    assert tags.put_tag(ctx, "m", "prod", version=1) == {
        "model_name": "m",
        "tag": "prod",
        "version": 1,
        "manifest_sha256": v1.manifest_sha256,
    }
    moved = tags.put_tag(ctx, "m", "prod", manifest_sha256=v2.manifest_sha256)
    assert moved["version"] == 2
    assert models.get_model(ctx, "m")["tags"]["prod"]["version"] == 2


def test_put_tag_errors(ctx, two_versions) -> None:
    with pytest.raises(InvalidBody):
        tags.put_tag(ctx, "m", "prod")
    with pytest.raises(InvalidBody):
        tags.put_tag(ctx, "m", "prod", version=1, manifest_sha256=sha(b"x"))
    with pytest.raises(InvalidName):
        tags.put_tag(ctx, "m", "no spaces", version=1)
    with pytest.raises(InvalidDigest):
        tags.put_tag(ctx, "m", "prod", manifest_sha256="xyz")
    with pytest.raises(ModelNotFound):
        tags.put_tag(ctx, "other", "prod", version=1)
    with pytest.raises(VersionNotFound):
        tags.put_tag(ctx, "m", "prod", version=3)
    with pytest.raises(VersionNotFound):
        tags.put_tag(ctx, "m", "prod", manifest_sha256=sha(b"not a version of m"))


def test_if_match_makes_tag_moves_compare_and_swap(ctx, two_versions) -> None:
    v1, v2 = two_versions
    with pytest.raises(TagMoved, match="does not exist"):
        tags.put_tag(ctx, "m", "prod", version=1, if_match="*")
    tags.put_tag(ctx, "m", "prod", version=1)
    with pytest.raises(TagMoved, match=f"points at {v1.manifest_sha256}"):
        tags.put_tag(ctx, "m", "prod", version=2, if_match=f'"{v2.manifest_sha256}"')
    # quoted, weak or bare: all name the same manifest
    for if_match in (f'"{v1.manifest_sha256}"', f'W/"{v1.manifest_sha256}"', v1.manifest_sha256):
        tags.put_tag(ctx, "m", "prod", version=1, if_match=if_match)
    tags.put_tag(ctx, "m", "prod", version=2, if_match="*")
    with pytest.raises(TagMoved):
        tags.delete_tag(ctx, "m", "prod", if_match=v1.manifest_sha256)
    tags.delete_tag(ctx, "m", "prod", if_match=v2.manifest_sha256)
    with pytest.raises(TagNotFound):
        tags.delete_tag(ctx, "m", "prod")


def test_delete_version_drops_an_unshared_carton_but_not_its_bytes(ctx, push) -> None:
    shared = b"in both versions"
    v1 = push(make_carton({"w/shared": shared, "w/one": b"only v1"}, model_name="m"))
    v2 = push(make_carton({"w/shared": shared, "w/two": b"only v2"}, model_name="m"))
    answer = deletes.delete_version(ctx, "m", 2)
    assert answer == {
        "model_name": "m",
        "version": 2,
        "manifest_sha256": v2.manifest_sha256,
        "carton_deleted": True,
    }
    with pytest.raises(CartonNotFound):
        cartons.get_carton(ctx, v2.manifest_sha256)
    assert sha(b"only v2") in stored(ctx) - referenced(ctx)  # waits for GC
    assert sha(shared) in referenced(ctx)
    with ctx.sessions() as session:
        [listed] = list_models(session).items
    assert (listed["latest_version"], listed["manifest_sha256"]) == (1, v1.manifest_sha256)
    with pytest.raises(VersionNotFound):
        deletes.delete_version(ctx, "m", 2)


def test_a_carton_another_model_uses_stays(ctx, push) -> None:
    data = make_carton({"w": b"same"}, model_name=None)
    first = push(data, model_name="a")
    push(data, model_name="b")
    assert deletes.delete_version(ctx, "a", 1)["carton_deleted"] is False
    assert cartons.get_carton(ctx, first.manifest_sha256)["versions"][0]["model_name"] == "b"


def test_delete_model(ctx, two_versions) -> None:
    assert deletes.delete_model(ctx, "m") == {
        "model_name": "m",
        "versions": 2,
        "cartons_deleted": 2,
    }
    with pytest.raises(ModelNotFound):
        models.get_model(ctx, "m")
    assert referenced(ctx) == set()
