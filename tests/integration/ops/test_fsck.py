"""fsck on every backend pair, and the operator CLI (gc, fsck, token) exit codes and output."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from registry import cli
from registry.db.tables import ApiToken, Version
from registry.services.fsck import check_integrity
from tests.integration.ops.helpers import corrupt, make_carton, push, sha, stored

WEIGHTS = b"weights " * 2000
OTHER = b"other model bytes " * 500


def push_two(client) -> tuple[str, str]:
    a = push(client, make_carton({"w/weights.bin": WEIGHTS}, model_name="alpha"))
    b = push(client, make_carton({"w/weights.bin": WEIGHTS, "w/x": OTHER}, model_name="beta"))
    assert a.status_code == 201 and b.status_code == 201, (a.text, b.text)
    return a.json()["manifest_sha256"], b.json()["manifest_sha256"]


def states(ctx) -> dict[str, tuple[str, str]]:
    with ctx.sessions() as s:
        return {v.manifest_sha256: (v.state, v.state_reason) for v in s.scalars(select(Version))}


def test_clean_after_pushes(ops_client, registry_ctx):
    push_two(ops_client)
    report = check_integrity(registry_ctx, verify_hashes=True)
    assert report.ok
    assert report.missing == report.wrong_size == report.corrupt == report.orphans == []
    assert report.blobs_hashed == report.blobs_checked >= 3
    sampled = check_integrity(registry_ctx, verify_hashes=True, sample=1)
    assert sampled.ok and sampled.blobs_hashed == 1


def test_missing_blob_marks_versions_unavailable(ops_client, registry_ctx):
    alpha, beta = push_two(ops_client)
    assert registry_ctx.blobs.delete(sha(WEIGHTS))

    report = check_integrity(registry_ctx)

    assert not report.ok
    assert report.missing == [sha(WEIGHTS)]
    assert report.affected_cartons == sorted([alpha, beta])
    for manifest in (alpha, beta):
        state, reason = states(registry_ctx)[manifest]
        assert state == "UNAVAILABLE"
        assert sha(WEIGHTS) in reason and "missing" in reason
    # Putting the blob back makes fsck clean, but the versions stay UNAVAILABLE until loaded.
    registry_ctx.blobs.put_bytes(sha(WEIGHTS), WEIGHTS)
    assert check_integrity(registry_ctx).ok
    assert states(registry_ctx)[alpha][0] == "UNAVAILABLE"


def test_corrupt_blob_found_by_scrub(ops_client, registry_ctx):
    alpha, beta = push_two(ops_client)
    corrupt(registry_ctx, sha(OTHER))

    assert check_integrity(registry_ctx).ok  # same size: only the scrub sees it
    report = check_integrity(registry_ctx, verify_hashes=True)
    assert report.corrupt == [sha(OTHER)]
    assert report.affected_cartons == [beta]
    assert states(registry_ctx)[beta][0] == "UNAVAILABLE"
    assert "corrupt" in states(registry_ctx)[beta][1]
    assert states(registry_ctx)[alpha][0] == "READY"


def test_orphans_listed_but_not_a_failure(ops_client, registry_ctx):
    push_two(ops_client)
    orphan = b"nobody references me"
    registry_ctx.blobs.put_bytes(sha(orphan), orphan)
    report = check_integrity(registry_ctx)
    assert report.orphans == [sha(orphan)]
    assert report.ok


@pytest.fixture
def registry_env(registry_ctx, monkeypatch):
    """REGISTRY_* variables pointing the CLI at the test's registry."""
    s = registry_ctx.settings
    monkeypatch.setenv("REGISTRY_DATA_DIR", str(s.data_dir))
    monkeypatch.setenv("REGISTRY_DATABASE_URL", s.database_url)
    monkeypatch.setenv("REGISTRY_BLOB_STORE", s.blob_store)
    if s.s3_endpoint_url:
        monkeypatch.setenv("REGISTRY_S3_ENDPOINT_URL", s.s3_endpoint_url)
    monkeypatch.setenv("REGISTRY_MIGRATE_ON_START", "false")
    return registry_ctx


def test_cli_fsck_and_gc(ops_client, registry_env, capsys):
    ctx = registry_env
    alpha, beta = push_two(ops_client)
    orphan = b"cli orphan"
    ctx.blobs.put_bytes(sha(orphan), orphan)

    assert cli.main(["fsck", "--verify-hashes"]) == 0
    out = capsys.readouterr().out
    assert f"orphan blob {sha(orphan)}" in out and "fsck: ok" in out

    assert cli.main(["gc", "--grace", "1h"]) == 0
    assert "deleted 0 blobs" in capsys.readouterr().out
    assert cli.main(["gc", "--grace", "0s", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"would delete {sha(orphan)}" in out and sha(orphan) in stored(ctx)
    assert cli.main(["gc", "--grace", "0s", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["blobs_deleted"] == 1 and body["bytes_freed"] == len(orphan)
    assert sha(orphan) not in stored(ctx)

    ctx.blobs.delete(sha(OTHER))
    assert cli.main(["fsck"]) == 1
    out = capsys.readouterr().out
    assert f"missing blob {sha(OTHER)}" in out
    assert f"affected carton {beta}" in out and alpha not in out
    assert cli.main(["fsck", "--json"]) == 1
    body = json.loads(capsys.readouterr().out)
    assert body["ok"] is False and body["missing"] == [sha(OTHER)]
    assert body["affected_cartons"] == [beta]

    assert cli.main(["gc", "--grace", "soon"]) == 2  # a usage error
    assert cli.main(["gc", "--max-unused", "lots"]) == 2
    assert cli.main(["gc", "--max-unused", "-1%"]) == 2
    assert cli.main(["gc", "--grace", "1h", "--max-unused", "5%"]) == 0


def test_cli_tokens(registry_env, capsys):
    ctx = registry_env
    assert cli.main(["token", "create", "--scope", "push", "--name", "ci"]) == 0
    captured = capsys.readouterr()
    token = captured.out.strip().splitlines()[-1]
    assert token.startswith("crt_") and len(token) > 40

    assert cli.main(["token", "create", "--scope", "admin", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["token"].startswith("crt_") and body["scopes"] == [
        "pull",
        "push",
        "delete",
        "admin",
    ]
    assert body["name"]

    assert cli.main(["token", "create", "--scope", "pull", "--name", "ci"]) == 1  # taken

    assert cli.main(["token", "list"]) == 0
    listing = capsys.readouterr().out
    assert "ci" in listing and token not in listing

    with ctx.sessions() as s:
        rows = list(s.scalars(select(ApiToken)))
    for row in rows:
        assert token not in (row.token_hash, row.name, row.scopes)
        assert body["token"] not in (row.token_hash, row.name, row.scopes)

    assert cli.main(["token", "revoke", "ci"]) == 0
    assert "revoked" in capsys.readouterr().out
    assert cli.main(["token", "revoke", "ci"]) == 1
    assert cli.main(["token", "list", "--json"]) == 0
    names = [t["name"] for t in json.loads(capsys.readouterr().out)]
    assert "ci" not in names
