"""Push: bytes verified and stored, rows indexed, names checked, dedup counted."""

from __future__ import annotations

import io
import zipfile

import pytest

from registry.carton.errors import CartonFormatError, CartonLimitExceeded
from registry.carton.limits import ArchiveLimits
from registry.carton.zipread import CartonArchive
from registry.errors import (
    InvalidCarton,
    InvalidName,
    LinkFetchFailed,
    LinkHostNotAllowed,
    ManifestMismatch,
    ModelNameRequired,
    NamespaceNotFound,
)
from registry.services import models
from registry.services.context import RegistryContext
from registry.services.ingest import PushResult
from tests.conftest import FIXTURE_CARTONS, fixture_carton
from tests.helpers import carton_toml, make_carton, referenced, sha, stored


@pytest.mark.parametrize("path", FIXTURE_CARTONS[:3], ids=lambda p: p.name)
def test_push_stores_every_file_and_indexes_the_carton(ctx: RegistryContext, push, path) -> None:
    with CartonArchive.open(path) as archive:  # ?model= only where carton.toml names none
        config = archive.config()
    named = config is not None and config.model_name
    result = push(path, model_name=None if named else "fallback")
    assert result.created is True
    assert result.model_name == (config.model_name if named and config else "fallback")
    assert result.bytes_new == result.bytes_total - result.bytes_deduplicated
    assert referenced(ctx) <= stored(ctx)
    assert len(referenced(ctx)) <= result.files
    body = result.as_json()
    assert "created" not in body and "seconds" not in body
    assert body["manifest_sha256"] == result.manifest_sha256


def test_repush_answers_the_same_version_and_adds_nothing(ctx, push) -> None:
    first = push(fixture_carton("02"))
    again = push(fixture_carton("02"))
    assert (
        (again.model_name, again.version)
        == (first.model_name, first.version)
        == (
            "selftest_identity",
            1,
        )
    )
    assert again.created is False
    assert again.bytes_new == 0
    assert again.bytes_deduplicated == again.bytes_total == first.bytes_total


def test_shared_files_count_as_deduplicated(push) -> None:
    shared = b"shared weights " * 1000
    first = push(make_carton({"w/shared": shared, "w/a": b"a"}, model_name="m"))
    second = push(make_carton({"w/shared": shared, "w/b": b"b"}, model_name="m"))
    assert second.version == first.version + 1
    # carton.toml is the same file in both: deduplicated too
    assert second.bytes_deduplicated == len(shared) + len(carton_toml("m"))
    assert second.bytes_new == len(b"b")


def test_unnamed_carton_is_reachable_by_hash_only(push) -> None:
    result = push(make_carton({"w": b"x"}, model_name=None))
    assert (result.model_name, result.version) == (None, None)
    named = push(make_carton({"w": b"x"}, model_name=None), model_name="given")
    assert (named.model_name, named.version) == ("given", 1)


def test_tag_and_name_rules(ctx, push) -> None:
    push(make_carton({"w": b"1"}, model_name="tagged"), tag="stable")
    assert models.get_model(ctx, "tagged")["tags"]["stable"]["version"] == 1
    with pytest.raises(ModelNameRequired, match="a tag needs a model name"):
        push(make_carton({"w": b"2"}, model_name=None), tag="stable")
    with pytest.raises(InvalidName, match="invalid tag"):
        push(make_carton({"w": b"3"}, model_name="tagged"), tag="-bad")
    with pytest.raises(InvalidName, match="invalid model name"):
        push(make_carton({"w": b"4"}, model_name=None), model_name="a/b/c")
    with pytest.raises(NamespaceNotFound, match="no namespace named 'a'"):  # one level: fine
        push(make_carton({"w": b"4"}, model_name=None), model_name="a/b")


def test_bytes_that_do_not_match_their_manifest_are_refused(ctx, push) -> None:
    good = make_carton({"w/file": b"the real bytes"}, model_name="m")
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(good)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = b"an impostor!!!" if info.filename == "w/file" else src.read(info)
            dst.writestr(info.filename, data)
    with pytest.raises(ManifestMismatch, match="w/file"):
        push(out.getvalue())
    assert referenced(ctx) == set()


def test_format_errors_reach_the_caller_untranslated(push) -> None:
    """The carton format's own errors pass through; the HTTP table maps them (400, 413)."""
    with pytest.raises(CartonFormatError, match="not a zip archive"):
        push(b"not a zip at all" * 10)


@pytest.mark.settings(archive=ArchiveLimits(max_members=2))
def test_archive_limits_come_from_the_settings(push) -> None:
    with pytest.raises(CartonLimitExceeded, match="more than the limit of 2"):
        push(make_carton({"a": b"a", "b": b"b"}, model_name="m"))


def test_a_missing_file_must_be_in_the_registry_or_linked(push) -> None:
    with pytest.raises(InvalidCarton, match="LINKS has no URL"):
        push(make_carton({}, model_name="m", absent={"w/gone": sha(b"nowhere")}))


def test_a_missing_file_already_stored_is_taken_from_the_store(push) -> None:
    data = b"pushed before " * 100
    push(make_carton({"w/data": data}, model_name="first"))
    slim = push(make_carton({}, model_name="second", absent={"w/data": sha(data)}))
    assert slim.bytes_total == len(data) + len(carton_toml("second"))
    assert slim.bytes_new == len(carton_toml("second"))


def test_observers_hear_every_push_and_never_fail_it(ctx, push) -> None:
    heard: list[PushResult] = []

    def broken(_result: PushResult) -> None:
        raise RuntimeError("metrics are down")

    ctx.observers.push.extend([broken, heard.append])
    result = push(make_carton({"w": b"observed"}, model_name="m"))
    assert heard == [result]
    assert result.seconds > 0


def test_links_outside_the_allow_list_are_not_fetched(push) -> None:
    linked = {"w/big": (sha(b"elsewhere"), ["http://example.org/blob", "http://10.0.0.1/b"])}
    with pytest.raises(LinkHostNotAllowed, match="REGISTRY_LINK_FETCH_ALLOW") as info:
        push(make_carton({}, model_name="m", linked=linked))
    assert "http://example.org/blob" in info.value.message


@pytest.mark.settings(link_fetch_allow=("127.0.0.1:9",), link_fetch_timeout=5.0)
def test_an_allowed_link_that_fails_is_a_fetch_failure(push) -> None:
    linked = {"w/big": (sha(b"elsewhere"), ["http://127.0.0.1:9/blob"])}  # discard port: closed
    with pytest.raises(LinkFetchFailed) as info:
        push(make_carton({}, model_name="m", linked=linked))
    assert not isinstance(info.value, LinkHostNotAllowed)
