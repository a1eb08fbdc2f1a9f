"""hydrate against LINKS on any host: verification, fallback URLs, no partial output."""

from __future__ import annotations

from registry.carton.zipread import CartonArchive
from tests.conftest import REFERENCE, fixture_carton
from tests.integration.cli.conftest import (
    assert_full_and_valid,
    manifest_hash,
    member_bytes,
    relinked,
)


def test_hydrate_resolves_links_from_any_host(cli, static_server, tmp_path):
    for blob in (REFERENCE / "links-blobs").iterdir():
        static_server.routes[f"/mirror/{blob.name}"] = blob.read_bytes()
    slim = tmp_path / "slim.carton"
    relinked(
        fixture_carton("05"),
        slim,
        lambda sha: [f"{static_server.url}/missing/{sha}", f"{static_server.url}/mirror/{sha}"],
    )
    out = tmp_path / "full.carton"
    run = cli("hydrate", str(slim), "-o", str(out))
    assert run.code == 0, run.err
    expected = manifest_hash(fixture_carton("03"))
    assert run.last_line == expected
    assert_full_and_valid(out, expected)
    assert member_bytes(out) == member_bytes(fixture_carton("03"))


def test_hydrate_fails_on_wrong_bytes_and_leaves_no_output(cli, static_server, tmp_path):
    slim = tmp_path / "slim.carton"
    linked = relinked(fixture_carton("05"), slim, lambda sha: [f"{static_server.url}/bad/{sha}"])
    for sha in linked:
        static_server.routes[f"/bad/{sha}"] = b"not the right bytes"
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "full.carton"
    run = cli("hydrate", str(slim), "-o", str(out))
    assert run.code == 1
    assert not out.exists()
    assert list(out_dir.iterdir()) == []
    with CartonArchive.open(slim) as archive:
        linked_paths = [e.path for e in archive.manifest if e.path not in archive.members]
    assert any(p in run.err for p in linked_paths), run.err
    assert f"{static_server.url}/bad/" in run.err
    assert "MANIFEST says" in run.err


def test_hydrate_fails_on_unreachable_links(cli, tmp_path):
    slim = tmp_path / "slim.carton"
    relinked(fixture_carton("05"), slim, lambda sha: [f"http://127.0.0.1:9/{sha}"])
    out = tmp_path / "full.carton"
    run = cli("hydrate", str(slim), "-o", str(out))
    assert run.code == 1
    assert "127.0.0.1:9" in run.err
    assert not out.exists()


def test_hydrate_of_a_full_carton_rewrites_it(cli, tmp_path):
    src = fixture_carton("02")
    out = tmp_path / "full.carton"
    run = cli("hydrate", str(src), "-o", str(out))
    assert run.code == 0, run.err
    assert_full_and_valid(out, manifest_hash(src))
    assert member_bytes(out) == member_bytes(src)
