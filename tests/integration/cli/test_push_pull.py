"""push / pull / hydrate / ls / info through the CLI against a live server (both backends)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import httpx
import pytest

from tests.conftest import FIXTURE_CARTONS, fixture_carton
from tests.integration.cli.conftest import (
    assert_full_and_valid,
    make_carton,
    manifest_hash,
    member_bytes,
)

PUSHABLE = [p for p in FIXTURE_CARTONS if "05_links" not in p.name]


@pytest.mark.parametrize("carton", PUSHABLE, ids=lambda p: p.name)
def test_push_prints_manifest_hash_and_repush_uploads_nothing(cli, live_server, carton):
    expected = manifest_hash(carton)
    first = cli("push", str(carton), "--url", live_server.url)
    assert first.code == 0, first.err
    assert first.last_line == expected
    assert "deduplicated" in first.out
    assert "(nothing new)" not in first.out
    client = first.client
    assert client.count("POST", "/api/v1/blobs/missing") == 1
    assert client.count("POST", "/api/v1/cartons") == 1

    again = cli("push", str(carton), "--url", live_server.url)
    assert again.code == 0, again.err
    assert again.last_line == expected
    client = again.client
    assert client.count("PUT") == 0
    # The file was verified by the first push: one request, the slim POST, and no question.
    assert client.requests == [("POST", "/api/v1/cartons")]
    assert "uploaded 0 blob(s)" in again.out
    assert "(nothing new)" in again.out

    unverified = cli("push", "--no-cache", str(carton), "--url", live_server.url)
    assert unverified.code == 0, unverified.err
    assert unverified.client.count("POST", "/api/v1/blobs/missing") == 1
    assert unverified.out == again.out  # the same summary either way


def test_push_full_sends_the_file_as_is(cli, live_server):
    carton = fixture_carton("02")
    run = cli("push", "--full", str(carton), "--url", live_server.url)
    assert run.code == 0, run.err
    assert run.last_line == manifest_hash(carton)
    client = run.client
    assert client.count("PUT") == 0
    assert client.bytes_sent == carton.stat().st_size


def test_push_after_a_similar_carton_uploads_only_new_blobs(cli, live_server):
    # 05 is the slim form of 03: pushing 03 first makes 05's linked files known.
    full, slim = fixture_carton("03"), fixture_carton("05")
    assert cli("push", str(full), "--url", live_server.url).code == 0
    run = cli("push", str(slim), "--url", live_server.url)
    assert run.code == 0, run.err
    assert run.last_line == manifest_hash(slim)
    assert run.client.count("PUT") == 0


def test_a_verified_carton_with_links_still_asks_what_is_missing(cli, live_server):
    # The registry fetches what it lacks through LINKS rather than saying so: asked first,
    # the client uploads what the zip holds instead.
    full, slim = fixture_carton("03"), fixture_carton("05")
    assert cli("push", str(full), "--url", live_server.url).code == 0
    assert cli("push", str(slim), "--url", live_server.url).code == 0
    again = cli("push", str(slim), "--url", live_server.url)
    assert again.code == 0, again.err
    assert again.client.count("POST", "/api/v1/blobs/missing") == 1


def test_a_verified_carton_the_registry_lost_is_uploaded_after_the_post_says_so(
    cli, live_server, tmp_path
):
    from registry.services.deletes import delete_version
    from registry.services.gc import collect_garbage
    from tests.helpers import make_carton

    weights = os.urandom(300_000)
    path = tmp_path / "lost.carton"
    path.write_bytes(make_carton({"model/w.bin": weights}, model_name="lost"))
    assert cli("push", str(path), "--url", live_server.url).code == 0  # verified now
    delete_version(live_server.ctx, "lost", 1)
    collect_garbage(live_server.ctx, grace_seconds=0)  # the registry holds none of it

    run = cli("push", str(path), "--url", live_server.url)
    assert run.code == 0, run.err
    assert run.last_line == manifest_hash(path)
    client = run.client
    assert client.count("POST", "/api/v1/blobs/missing") == 0
    assert client.count("POST", "/api/v1/cartons") == 2  # a 400 naming w.bin, then the push
    assert "(nothing new)" not in run.out
    # carton.toml rides in the slim zip; the weights were uploaded once the POST named them.
    assert "uploaded 1 blob(s), 293 KiB; 1 already in the registry" in run.out, run.out
    assert "sent 293 KiB of 293 KiB" in run.out, run.out
    assert httpx.get(f"{live_server.url}/blobs/{sha256_hex(weights)}").content == weights


def test_push_with_tag_and_model_name(cli, live_server):
    carton = fixture_carton("02")
    run = cli("push", str(carton), "--tag", "prod", "--url", live_server.url)
    assert run.code == 0, run.err
    info = cli(
        "info",
        json.loads(cli("inspect", str(carton)).out)["model_name"] + "@prod",
        "--json",
        "--url",
        live_server.url,
    )
    assert info.code == 0, info.err
    data = json.loads(info.out)
    assert data["manifest_sha256"] == manifest_hash(carton)
    assert "prod" in data["model"]["tags"]


def test_push_non_zip_is_refused_before_anything_is_sent(cli, live_server, tmp_path):
    bogus = tmp_path / "bogus.carton"
    bogus.write_bytes(b"this is not a zip file at all\n" * 10)
    for extra in ((), ("--full",)):
        run = cli("push", str(bogus), *extra, "--url", live_server.url)
        assert run.code == 1
        assert run.err.strip().splitlines()[-1].startswith(f"error: {bogus}: not a zip archive")
        assert "(HTTP" not in run.err
        assert run.client.bytes_sent == 0 and run.client.requests == []


def test_connection_error_is_clear(cli, tmp_path):
    run = cli("push", str(fixture_carton("01")), "--url", "http://127.0.0.1:9")
    assert run.code == 1
    assert "cannot connect" in run.err
    assert "127.0.0.1:9" in run.err


def test_unknown_reference_is_a_clear_error(cli, live_server):
    run = cli("pull", "no-such-model", "--url", live_server.url)
    assert run.code == 1
    assert "error:" in run.err and "HTTP 404" in run.err


def test_ls_and_info(cli, live_server):
    for carton in PUSHABLE:
        assert cli("push", str(carton), "--url", live_server.url).code == 0
    names = {json.loads(cli("inspect", str(c)).out)["model_name"] for c in PUSHABLE} - {None}
    run = cli("ls", "--url", live_server.url)
    assert run.code == 0, run.err
    for name in names:
        assert name in run.out
    listing = cli("ls", "--json", "--url", live_server.url)
    assert {m["name"] for m in json.loads(listing.out)} == names

    name = sorted(names)[0]
    one = cli("ls", "--q", name, "--json", "--url", live_server.url)
    assert name in {m["name"] for m in json.loads(one.out)}

    info = cli("info", name, "--json", "--url", live_server.url)
    assert info.code == 0, info.err
    data = json.loads(info.out)
    assert data["model"]["name"] == name
    assert data["versions"][0]["model_name"] == name
    by_hash = cli("info", data["manifest_sha256"], "--json", "--url", live_server.url)
    assert json.loads(by_hash.out)["manifest_sha256"] == data["manifest_sha256"]


def test_ls_paginates(cli, live_server, monkeypatch):
    from registry import client as client_module

    for carton in PUSHABLE:
        assert cli("push", str(carton), "--url", live_server.url).code == 0
    original = client_module.RegistryClient.list_models

    def small_pages(self, q=None, limit=200):
        return original(self, q, limit=1)

    monkeypatch.setattr(client_module.RegistryClient, "list_models", small_pages)
    run = cli("ls", "--json", "--url", live_server.url)
    assert run.code == 0, run.err
    named = len(PUSHABLE) - 1  # 01 has no model_name
    assert len(json.loads(run.out)) == named
    assert run.client.count("GET", "/api/v1/models") in (named, named + 1)


# -- pull (needs GET /cartons/{sha}.carton) --------------------------------------------


@pytest.mark.parametrize("carton", PUSHABLE, ids=lambda p: p.name)
def test_pull_full_round_trip(cli, live_server, tmp_path, carton):
    expected = manifest_hash(carton)
    assert cli("push", str(carton), "--url", live_server.url).code == 0
    out = tmp_path / "full.carton"
    run = cli("pull", expected, "--full", "-o", str(out), "--url", live_server.url)
    assert run.code == 0, run.err
    assert run.last_line == expected
    assert_full_and_valid(out, expected)
    assert member_bytes(out) == member_bytes(carton)
    assert not list(tmp_path.glob(".*.part"))


@pytest.mark.parametrize("carton", PUSHABLE, ids=lambda p: p.name)
def test_pull_slim_then_hydrate(cli, live_server, tmp_path, carton):
    expected = manifest_hash(carton)
    assert cli("push", str(carton), "--url", live_server.url).code == 0
    slim = tmp_path / "slim.carton"
    run = cli("pull", expected, "-o", str(slim), "--url", live_server.url)
    assert run.code == 0, run.err
    assert manifest_hash(slim) == expected
    full = tmp_path / "hydrated.carton"
    run = cli("hydrate", str(slim), "-o", str(full))
    assert run.code == 0, run.err
    assert run.last_line == expected
    assert_full_and_valid(full, expected)
    assert member_bytes(full) == member_bytes(carton)


def test_pull_by_every_kind_of_reference(cli, live_server, tmp_path):
    carton = fixture_carton("02")
    expected = manifest_hash(carton)
    name = json.loads(cli("inspect", str(carton)).out)["model_name"]
    assert cli("push", str(carton), "--tag", "stable", "--url", live_server.url).code == 0
    for ref in (expected, name, f"{name}:1", f"{name}@stable"):
        out = tmp_path / f"{len(ref)}.carton"
        run = cli("pull", ref, "-o", str(out), "--url", live_server.url)
        assert run.code == 0, (ref, run.err)
        assert manifest_hash(out) == expected, ref


def test_pull_default_output_name(cli, live_server, tmp_path, monkeypatch):
    """The name the web page's download link saves as: NAME-HASH12[-full].carton."""
    carton = fixture_carton("02")
    assert cli("push", str(carton), "--url", live_server.url).code == 0
    name = json.loads(cli("inspect", str(carton)).out)["model_name"]
    short = manifest_hash(carton)[:12]
    monkeypatch.chdir(tmp_path)
    run = cli("pull", name, "--url", live_server.url)
    assert run.code == 0, run.err
    assert manifest_hash(Path(tmp_path / f"{name}-{short}.carton")) == manifest_hash(carton)
    run = cli("pull", name, "--full", "--url", live_server.url)
    assert run.code == 0, run.err
    assert manifest_hash(Path(tmp_path / f"{name}-{short}-full.carton")) == manifest_hash(carton)


def test_pull_name_alone_prefers_latest_tag_else_highest_version(cli, live_server, tmp_path):
    a1 = make_carton(tmp_path / "a1.carton", "alpha", {"model/w.bin": b"one"})
    a2 = make_carton(tmp_path / "a2.carton", "alpha", {"model/w.bin": b"two"})
    b1 = make_carton(tmp_path / "b1.carton", "beta", {"model/w.bin": b"one"})
    b2 = make_carton(tmp_path / "b2.carton", "beta", {"model/w.bin": b"two"})
    assert cli("push", str(a1), "--tag", "latest", "--url", live_server.url).code == 0
    for c in (a2, b1, b2):
        assert cli("push", str(c), "--url", live_server.url).code == 0
    for name, expected in (("alpha", a1), ("beta", b2), ("alpha:2", a2), ("beta:1", b1)):
        out = tmp_path / "pulled.carton"
        run = cli("pull", name, "-o", str(out), "--force", "--url", live_server.url)
        assert run.code == 0, run.err
        assert manifest_hash(out) == manifest_hash(expected), name


def test_push_recovers_when_gc_takes_a_blob_reported_present(
    cli, live_server, tmp_path, monkeypatch, as_chunks
):
    """The registry said a blob was stored, GC collected it before the carton came: upload it."""
    from registry.client.transport import RegistryClient
    from registry.services.deletes import delete_version
    from registry.services.gc import collect_garbage
    from tests.helpers import make_carton

    weights = os.urandom(200_000)
    first = tmp_path / "first.carton"
    first.write_bytes(make_carton({"model/w.bin": weights}, model_name="racer"))
    assert cli("push", str(first), "--url", live_server.url).code == 0
    delete_version(live_server.ctx, "racer", 1)  # the blob is now unreferenced, still stored

    second = tmp_path / "second.carton"
    second.write_bytes(
        make_carton({"model/w.bin": weights, "model/x.txt": b"x"}, model_name="racer")
    )
    real = RegistryClient.missing_blobs

    def missing_then_gc(self, hashes):  # type: ignore[no-untyped-def]
        answer = real(self, hashes)
        collect_garbage(live_server.ctx, grace_seconds=0)  # takes the unreferenced weights
        return answer

    monkeypatch.setattr(RegistryClient, "missing_blobs", missing_then_gc)
    run = cli("push", str(second), "--url", live_server.url)
    assert run.code == 0, run.err
    assert run.last_line == manifest_hash(second)
    # The weights (over min_file_bytes) are sent again as chunks once named missing.
    assert run.client.count("POST", "/api/v1/blobs/", "/assemble") == 1
    with live_server.ctx.sessions() as s:
        from sqlalchemy import select

        from registry.db.tables import Blob

        assert s.scalar(select(Blob.sha256).where(Blob.sha256 == sha256_hex(weights)))


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
