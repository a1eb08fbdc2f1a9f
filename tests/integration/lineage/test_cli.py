"""``carton-registry diff`` and ``lineage`` against a live server."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.integration.lineage.weights import RETRAINED, WEIGHTS, family

pytestmark = pytest.mark.parametrize("backend", ["sqlite-fs"], indirect=True)


@pytest.fixture
def pushed(live_server) -> dict[str, str]:
    out = {}
    with httpx.Client(base_url=live_server.url, timeout=60) as http:
        for key, version in family().items():
            r = http.post("/api/v1/cartons", content=version.carton("mini"))
            assert r.status_code == 201, r.text
            out[key] = r.json()["manifest_sha256"]
        r = http.put("/api/v1/models/mini/tags/prod", json={"version": 1})
        assert r.status_code == 200, r.text
    return out


def test_diff_prints_files_tensors_and_json(cli, live_server, pushed):
    run = cli("--url", live_server.url, "diff", "mini@prod", "mini:2", "--exact")
    assert run.code == 0, run.err
    assert f"from mini@prod  {pushed['base']}" in run.out
    assert "files: 1 changed, 0 added, 0 removed, 1 same" in run.out
    assert f"~  {WEIGHTS}" in run.out
    assert "tensors: 2 changed, 0 added, 0 removed, 15 same" in run.out
    for name in RETRAINED:
        assert f"~ {name}  F32" in run.out

    run = cli("--url", live_server.url, "diff", pushed["grown"][:10], "mini:4", "--json")
    assert run.code == 0, run.err
    body = json.loads(run.out)
    assert body["from"] == pushed["grown"] and body["to"] == pushed["renamed"]
    assert body["bytes_changed"] == 0


def test_lineage_prints_parent_and_derivatives(cli, live_server, pushed):
    run = cli("--url", live_server.url, "lineage", "mini:2")
    assert run.code == 0, run.err
    assert f"derived from mini:1 ({pushed['base'][:12]}): shares" in run.out
    assert f"mini:3 ({pushed['grown'][:12]})" in run.out  # its derivative
    run = cli("--url", live_server.url, "lineage", "mini:1", "--json")
    body = json.loads(run.out)
    assert body["parent"] is None
    assert [c["manifest_sha256"] for c in body["children"]] == [pushed["tuned"]]
    assert "derived from nothing stored" in cli("--url", live_server.url, "lineage", "mini:1").out


def test_errors_are_one_line(cli, live_server, pushed):
    run = cli("--url", live_server.url, "diff", "mini:1", "nope:1")
    assert run.code == 1 and run.err.startswith("error: ") and "nope" in run.err
    run = cli("--url", live_server.url, "lineage", "mini:9")
    assert run.code == 1 and "no version 9" in run.err
