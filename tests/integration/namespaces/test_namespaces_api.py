"""Namespaces: names ``ns/model``, namespaced tokens, and private means 404 to outsiders."""

from __future__ import annotations

import pytest

from tests.helpers import make_carton
from tests.integration.namespaces.conftest import SECRET, Teams, bearer, sha

pytestmark = pytest.mark.settings(auth="write")

OUTSIDERS = [None, "open_push"]  # anonymous, and another namespace's token
INSIDERS = ["acme_push", "acme_pull", "admin"]


def test_namespace_api_lists_what_the_caller_may_see(client, teams: Teams) -> None:
    names = lambda who: [  # noqa: E731
        n["name"]
        for n in client.get("/api/v1/namespaces", headers=teams.h(who)).json()["namespaces"]
    ]
    assert names(None) == ["open"]
    assert names("open_push") == ["open"]
    assert names("acme_pull") == ["acme", "open"]
    assert names("admin") == ["acme", "open"]
    r = client.get("/api/v1/namespaces/acme", headers=teams.h("acme_pull"))
    assert r.status_code == 200
    assert r.json()["visibility"] == "private"
    assert r.json()["model_names"] == ["acme/bert"]
    hidden = client.get("/api/v1/namespaces/acme")
    missing = client.get("/api/v1/namespaces/nosuch")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["error"] == missing.json()["error"].replace("nosuch", "acme")


def test_only_a_global_admin_creates_namespaces(client, registry_ctx, teams: Teams) -> None:
    from registry.services.auth import create_token

    ns_admin = create_token(registry_ctx, None, "admin", ["acme"])[0]
    r = client.put(
        "/api/v1/namespaces/other", json={"visibility": "public"}, headers=bearer(ns_admin)
    )
    assert r.status_code == 403, r.text
    r = client.put(
        "/api/v1/namespaces/other", json={"visibility": "public"}, headers=teams.h("acme_push")
    )
    assert r.status_code == 403
    r = client.put(
        "/api/v1/namespaces/other", json={"visibility": "secret"}, headers=teams.h("admin")
    )
    assert r.status_code == 400 and "visibility" in r.json()["error"]
    r = client.put(
        "/api/v1/namespaces/Bad_Name", json={"visibility": "public"}, headers=teams.h("admin")
    )
    assert r.status_code == 400 and "namespace" in r.json()["error"]
    r = client.put(
        "/api/v1/namespaces/models", json={"visibility": "public"}, headers=teams.h("admin")
    )
    assert r.status_code == 400
    # changing visibility: 200
    r = client.put(
        "/api/v1/namespaces/open", json={"visibility": "public"}, headers=teams.h("admin")
    )
    assert r.status_code == 200


def test_references_and_model_routes_take_the_full_name(client, teams: Teams) -> None:
    h = teams.h("acme_pull")
    r = client.get("/api/v1/models/acme/bert", headers=h)
    assert r.status_code == 200, r.text
    assert r.json()["name"] == "acme/bert"
    assert r.json()["tags"]["prod"]["manifest_sha256"] == teams.acme_sha
    # encoded as the CLI sends it
    assert client.get("/api/v1/models/acme%2Fbert", headers=h).status_code == 200
    for path in ("/models/acme/bert/versions/1.carton", "/models/acme/bert/tags/prod.carton"):
        r = client.get(path, headers=h, follow_redirects=False)
        assert r.status_code in (302, 307), (path, r.status_code)
        assert r.headers["location"].startswith(f"/cartons/{teams.acme_sha}")


@pytest.mark.parametrize("who", OUTSIDERS)
def test_private_models_are_404_to_outsiders(client, teams: Teams, who) -> None:
    h = teams.h(who)
    missing_model = client.get("/api/v1/models/acme/nosuch", headers=h)
    for path in (
        "/api/v1/models/acme/bert",
        f"/api/v1/cartons/{teams.acme_sha}",
        f"/api/v1/cartons/{teams.acme_sha[:12]}",
        f"/cartons/{teams.acme_sha}.carton",
        "/models/acme/bert/versions/1.carton",
        f"/blobs/{sha(SECRET)}",
        "/models/acme/bert",
        "/acme",
        "/v2/models/acme/bert",
    ):
        r = client.get(path, headers=h, follow_redirects=False)
        assert r.status_code == 404, (path, r.status_code, r.text[:200])
        assert SECRET[:10] not in r.content
    body = client.get("/api/v1/models/acme/bert", headers=h).json()
    assert body["error"] == missing_model.json()["error"].replace("nosuch", "bert")
    assert client.head(f"/blobs/{sha(SECRET)}", headers=h).status_code == 404
    listed = client.get("/api/v1/models", headers=h).json()["models"]
    assert [m["name"] for m in listed] == []
    assert client.get("/api/v1/models", params={"q": "bert"}, headers=h).json()["models"] == []
    stats = client.get("/api/v1/stats", headers=h).json()
    assert stats["models"] == 0 and stats["cartons"] == 0 and stats["logical_bytes"] == 0


@pytest.mark.parametrize("who", INSIDERS)
def test_private_models_are_visible_to_their_namespace(client, teams: Teams, who) -> None:
    h = teams.h(who)
    for path in (
        "/api/v1/models/acme/bert",
        f"/api/v1/cartons/{teams.acme_sha}",
        f"/cartons/{teams.acme_sha}.carton",
        "/models/acme/bert",
        "/acme",
        "/v2/models/acme/bert",
    ):
        r = client.get(path, headers=h)
        assert r.status_code == 200, (path, r.status_code, r.text[:200])
    r = client.get(f"/blobs/{sha(SECRET)}", headers=h)
    assert r.status_code == 200 and r.content == SECRET
    listed = client.get("/api/v1/models", headers=h).json()["models"]
    assert [m["name"] for m in listed] == ["acme/bert"]
    assert client.get("/api/v1/stats", headers=h).json()["models"] == 1


def test_namespaced_tokens_write_only_in_their_namespaces(client, teams: Teams) -> None:
    carton = make_carton({"x": b"open model"}, model_name="gpt")
    # open's token into acme: acme is private, so it does not exist for it
    r = client.post(
        "/api/v1/cartons",
        content=carton,
        params={"namespace": "acme"},
        headers=teams.h("open_push"),
    )
    assert r.status_code == 404, r.text
    # acme's token into open (public): forbidden
    r = client.post(
        "/api/v1/cartons",
        content=carton,
        params={"namespace": "open"},
        headers=teams.h("acme_push"),
    )
    assert r.status_code == 403, r.text
    # a namespaced token into the root namespace: forbidden
    r = client.post("/api/v1/cartons", content=carton, headers=teams.h("open_push"))
    assert r.status_code == 403, r.text
    assert client.get("/api/v1/models/gpt").status_code == 404
    # a name spelling its namespace in carton.toml
    named = make_carton({"x": b"open model"}, model_name="open/gpt")
    r = client.post("/api/v1/cartons", content=named, headers=teams.h("open_push"))
    assert r.status_code == 201, r.text
    assert r.json()["model_name"] == "open/gpt"
    # tags and deletes: only inside
    r = client.put(
        "/api/v1/models/acme/bert/tags/x", json={"version": 1}, headers=teams.h("open_push")
    )
    assert r.status_code == 404
    r = client.put(
        "/api/v1/models/open/gpt/tags/x", json={"version": 1}, headers=teams.h("acme_push")
    )
    assert r.status_code == 403
    r = client.put(
        "/api/v1/models/acme/bert/tags/x", json={"version": 1}, headers=teams.h("acme_push")
    )
    assert r.status_code == 200
    r = client.delete("/api/v1/models/acme/bert/tags/x", headers=teams.h("acme_push"))
    assert r.status_code == 200
    r = client.delete("/api/v1/models/open/gpt/versions/1", headers=teams.h("acme_push"))
    assert r.status_code == 403
    # a namespace that does not exist
    r = client.post(
        "/api/v1/cartons", content=carton, params={"namespace": "nosuch"}, headers=teams.h("admin")
    )
    assert r.status_code == 404 and "nosuch" in r.json()["error"]


def test_root_names_keep_working_and_reserved_words_are_refused(client, teams: Teams) -> None:
    r = client.post(
        "/api/v1/cartons",
        content=make_carton({"x": b"root"}, model_name="plain"),
        headers=teams.h("admin"),
    )
    assert r.status_code == 201
    assert client.get("/api/v1/models/plain").status_code == 200
    assert [m["name"] for m in client.get("/api/v1/models").json()["models"]] == ["plain"]
    r = client.post(
        "/api/v1/cartons",
        content=make_carton({"x": b"d"}, model_name="diff"),
        params={"namespace": "open"},
        headers=teams.h("admin"),
    )
    assert r.status_code == 400 and "route word" in r.json()["error"]
    r = client.post(
        "/api/v1/cartons",
        content=make_carton({"x": b"d"}, model_name="a/b/c"),
        headers=teams.h("admin"),
    )
    assert r.status_code == 400


def test_whoami_lists_the_token_namespaces(client, teams: Teams) -> None:
    assert client.get("/api/v1/whoami", headers=teams.h("acme_pull")).json() == {
        "auth": "write",
        "scopes": ["pull"],
        "namespaces": ["acme"],
    }
    assert "namespaces" not in client.get("/api/v1/whoami", headers=teams.h("admin")).json()
