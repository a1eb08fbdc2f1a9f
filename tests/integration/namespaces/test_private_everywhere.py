"""Private means private everywhere: lineage, diff, search, web pages, stats, Triton index."""

from __future__ import annotations

import pytest

from tests.helpers import make_carton
from tests.integration.namespaces.conftest import SECRET, SHARED, Teams, bearer, sha

pytestmark = pytest.mark.settings(auth="write")


@pytest.fixture
def open_sha(client, teams: Teams) -> str:
    """open/gpt: shares SHARED with acme/bert (which was stored first)."""
    carton = make_carton({"shared.bin": SHARED, "own.bin": b"open's own"}, model_name="gpt")
    r = client.post(
        "/api/v1/cartons",
        content=carton,
        params={"namespace": "open"},
        headers=teams.h("open_push"),
    )
    assert r.status_code == 201, r.text
    return str(r.json()["manifest_sha256"])


def test_lineage_names_no_private_carton_to_outsiders(client, teams: Teams, open_sha: str) -> None:
    inside = client.get(f"/api/v1/cartons/{open_sha}/lineage", headers=teams.h("admin")).json()
    assert inside["parent"]["manifest_sha256"] == teams.acme_sha
    assert inside["parent"]["model_name"] == "acme/bert"
    for who in (None, "open_push"):
        r = client.get(f"/api/v1/cartons/{open_sha}/lineage", headers=teams.h(who))
        assert r.status_code == 200
        assert r.json()["parent"] is None, r.json()
        r = client.get(f"/api/v1/cartons/{teams.acme_sha}/lineage", headers=teams.h(who))
        assert r.status_code == 404
    mine = client.get(f"/api/v1/cartons/{teams.acme_sha}/lineage", headers=teams.h("acme_pull"))
    assert mine.status_code == 200
    assert [c["model_name"] for c in mine.json()["children"]] == ["open/gpt"]  # public


def test_diff_of_private_refs_is_404_to_outsiders(client, teams: Teams, open_sha: str) -> None:
    params = {"from": "acme/bert:1", "to": "open/gpt"}
    assert (
        client.get("/api/v1/diff", params=params, headers=teams.h("acme_pull")).status_code == 200
    )
    for who in (None, "open_push"):
        r = client.get("/api/v1/diff", params=params, headers=teams.h(who))
        assert r.status_code == 404, r.text
        r = client.get(
            "/api/v1/diff",
            params={"from": teams.acme_sha[:10], "to": open_sha},
            headers=teams.h(who),
        )
        assert r.status_code == 404, r.text
    assert client.get("/models/acme/bert/diff").status_code == 404
    assert client.get("/models/acme/bert/diff", headers=teams.h("acme_pull")).status_code == 200


def test_search_hits_only_readable_models(client, teams: Teams, open_sha: str) -> None:
    for q in ("bert", "noop", "acme"):
        names = [m["name"] for m in client.get("/api/v1/models", params={"q": q}).json()["models"]]
        assert "acme/bert" not in names, q
    inside = client.get("/api/v1/models", params={"q": "bert"}, headers=teams.h("acme_pull"))
    assert [m["name"] for m in inside.json()["models"]] == ["acme/bert"]
    assert "acme/bert" not in client.get("/?q=bert").text
    assert "acme/bert" in client.get("/?q=bert", headers=teams.h("acme_pull")).text
    assert [
        m["name"]
        for m in client.get("/api/v1/models", params={"namespace": "open"}).json()["models"]
    ] == ["open/gpt"]
    assert client.get("/api/v1/models", params={"namespace": "acme"}).status_code == 404


def test_pages_and_stats(client, teams: Teams, open_sha: str) -> None:
    for path in ("/", "/stats", "/open", f"/cartons/{open_sha}", "/models/open/gpt"):
        page = client.get(path)
        assert page.status_code == 200, path
        assert "acme" not in page.text, path
    for path in (
        f"/cartons/{teams.acme_sha}",
        f"/cartons/{teams.acme_sha}/files/w.bin",
        f"/cartons/{teams.acme_sha}/raw/w.bin",
    ):
        assert client.get(path).status_code == 404, path
        assert client.get(path, headers=teams.h("acme_pull")).status_code == 200, path
    page = client.get("/models/acme/bert", headers=teams.h("acme_pull"))
    assert "badge-private" in page.text
    assert "badge-private" not in client.get("/models/open/gpt").text
    assert "badge-private" in client.get("/acme", headers=teams.h("acme_pull")).text
    whole = client.get("/api/v1/stats", headers=teams.h("admin")).json()
    outside = client.get("/api/v1/stats").json()
    assert (whole["models"], outside["models"]) == (2, 1)
    acme_bytes = client.get(f"/api/v1/cartons/{teams.acme_sha}", headers=teams.h("admin"))
    assert outside["logical_bytes"] == whole["logical_bytes"] - acme_bytes.json()["bytes_total"]
    acme = client.get(
        "/api/v1/stats", params={"namespace": "acme"}, headers=teams.h("acme_pull")
    ).json()
    assert acme["models"] == 1 and acme["cartons"] == 1
    assert client.get("/api/v1/stats", params={"namespace": "acme"}).status_code == 404


def test_triton_index_and_metadata(client, teams: Teams) -> None:
    outside = client.post("/v2/repository/index").json()
    assert all(e["name"] != "acme/bert" for e in outside)
    inside = client.post("/v2/repository/index", headers=teams.h("acme_pull")).json()
    assert {"name": "acme/bert", "version": "1", "state": "READY", "reason": ""} in inside
    assert client.get("/v2/models/acme/bert/config").status_code == 404
    r = client.get("/v2/models/acme/bert/versions/1/config", headers=teams.h("acme_pull"))
    assert r.status_code == 200, r.text
    assert (
        client.post(
            "/v2/repository/models/acme/bert/unload", headers=teams.h("open_push")
        ).status_code
        == 404
    )
    r = client.post("/v2/repository/models/acme/bert/unload", headers=teams.h("acme_push"))
    assert r.status_code == 200, r.text


def test_blob_readable_through_any_readable_carton(client, teams: Teams, open_sha: str) -> None:
    # SHARED is in open/gpt too: anyone may read it; SECRET only acme's tokens
    assert client.get(f"/blobs/{sha(SHARED)}").status_code == 200
    assert client.get(f"/blobs/{sha(SECRET)}").status_code == 404
    assert client.get(f"/blobs/{sha(SECRET)}", headers=bearer(teams.acme_pull)).status_code == 200


def test_top_level_paths_that_are_no_namespace_are_404(client, teams: Teams) -> None:
    for path in ("/Not_A_Namespace", "/nosuch", "/favicon.ico"):
        assert client.get(path).status_code == 404, path
    assert client.get("/open").status_code == 200


def test_lineage_truncation_counts_no_private_child(client, teams: Teams, monkeypatch) -> None:
    """Children are filtered before the limit: a private derivative does not show up even as
    'more children than shown'."""
    from registry.services import lineage

    base = make_carton({"base.bin": b"open base weights " * 8192}, model_name="base")
    r = client.post(
        "/api/v1/cartons", content=base, params={"namespace": "open"}, headers=teams.h("open_push")
    )
    assert r.status_code == 201, r.text
    base_sha = r.json()["manifest_sha256"]
    derived = make_carton(
        {"base.bin": b"open base weights " * 8192, "head.bin": SECRET}, model_name="derived"
    )
    r = client.post(
        "/api/v1/cartons", content=derived, params={"namespace": "acme"}, headers=teams.h("admin")
    )
    assert r.status_code == 201, r.text
    monkeypatch.setattr(lineage, "CHILDREN_SHOWN", 0)
    inside = client.get(f"/api/v1/cartons/{base_sha}/lineage", headers=teams.h("acme_pull"))
    assert inside.json()["children_truncated"] is True  # one child, none shown
    for who in (None, "open_push"):
        outside = client.get(f"/api/v1/cartons/{base_sha}/lineage", headers=teams.h(who)).json()
        assert outside["children"] == [] and outside["children_truncated"] is False
