"""Dedup that leaks nothing: a token of namespace B learns nothing about A's bytes.

Asked about A's files or chunks it hears "missing"; it uploads them, the registry
verifies them and keeps its one copy (storage does not grow); from then on that same
token (and only it) hears "present".
"""

from __future__ import annotations

import pytest

from registry.client import RegistryClient, push_carton
from registry.services.auth import create_token
from tests.helpers import make_carton
from tests.integration.namespaces.conftest import SECRET, SHARED, Teams, bearer, sha

pytestmark = pytest.mark.settings(auth="write")


def stored_bytes(client, teams: Teams) -> int:
    return int(client.get("/api/v1/stats", headers=teams.h("admin")).json()["stored_bytes"])


def missing(client, token: str | None, hashes: list[str]) -> list[str]:
    r = client.post("/api/v1/blobs/missing", json={"sha256": hashes}, headers=bearer(token))
    assert r.status_code == 200, r.text
    return list(r.json()["missing"])


def test_blob_negotiation_tells_b_nothing(client, registry_ctx, teams: Teams) -> None:
    both = [sha(SECRET), sha(SHARED)]
    assert missing(client, teams.acme_push, both) == []
    assert missing(client, teams.admin, both) == []  # global: reads everything
    assert missing(client, teams.open_push, both) == both
    before = stored_bytes(client, teams)
    r = client.put(f"/api/v1/blobs/{sha(SECRET)}", content=SECRET, headers=teams.h("open_push"))
    assert r.status_code == 201, r.text
    assert r.json()["created"] is True  # as if new: it cannot tell
    assert stored_bytes(client, teams) == before  # verified, and the one copy kept
    assert missing(client, teams.open_push, both) == [sha(SHARED)]  # its own upload
    other = create_token(registry_ctx, None, "push", ["open"])[0]
    assert missing(client, other, both) == both  # another token of the same namespace
    # a wrong body is still refused
    r = client.put(f"/api/v1/blobs/{sha(SHARED)}", content=b"not it", headers=teams.h("open_push"))
    assert r.status_code == 400


def test_a_push_cannot_borrow_hidden_bytes(client, teams: Teams) -> None:
    """A slim carton naming A's file without its bytes: B must send them."""
    carton = make_carton({"own.bin": b"b's"}, model_name="thief", absent={"w.bin": sha(SECRET)})
    r = client.post(
        "/api/v1/cartons",
        content=carton,
        params={"namespace": "open"},
        headers=teams.h("open_push"),
    )
    assert r.status_code == 400, r.text
    assert r.json()["missing"] == [sha(SECRET)]
    assert client.get("/api/v1/models/open/thief").status_code == 404
    # with the bytes, the push is fine and says they were new (to it)
    full = make_carton({"own.bin": b"b's", "w.bin": SECRET}, model_name="thief")
    before = stored_bytes(client, teams)
    r = client.post(
        "/api/v1/cartons", content=full, params={"namespace": "open"}, headers=teams.h("open_push")
    )
    assert r.status_code == 201, r.text
    assert r.json()["bytes_new"] == r.json()["bytes_total"]
    assert r.json()["bytes_deduplicated"] == 0
    grown = stored_bytes(client, teams) - before
    assert grown < len(SECRET) // 4  # only the small new files: SECRET is stored once


def test_chunk_negotiation_and_assembly_tell_b_nothing(client, teams: Teams) -> None:
    plan = client.get(f"/api/v1/blobs/{sha(SECRET)}/chunks", headers=teams.h("acme_pull")).json()
    assert plan["chunked"], plan
    names = [c["hash"] for c in plan["chunks"]]
    assert client.get(f"/api/v1/blobs/{sha(SECRET)}/chunks").status_code == 404
    r = client.post("/api/v1/chunks/missing", json={"chunks": names}, headers=teams.h("acme_push"))
    assert r.json()["missing"] == []
    r = client.post("/api/v1/chunks/missing", json={"chunks": names}, headers=teams.h("open_push"))
    assert r.json()["missing"] == names
    r = client.post(
        f"/api/v1/blobs/{sha(SECRET)}/assemble",
        json={"size": len(SECRET), "chunks": names},
        headers=teams.h("open_push"),
    )
    assert r.status_code == 400, r.text
    assert sorted(r.json()["missing_chunks"]) == sorted(set(names))


@pytest.mark.settings(auth="write")
def test_real_client_push_sends_hidden_bytes_once(live_server) -> None:
    ctx = live_server.ctx
    admin = create_token(ctx, None, "admin")[0]
    with RegistryClient(live_server.url, admin) as c:
        c.request("PUT", "/api/v1/namespaces/acme", json={"visibility": "private"})
        c.request("PUT", "/api/v1/namespaces/open", json={"visibility": "public"})
    acme = create_token(ctx, None, "push", ["acme"])[0]
    b = create_token(ctx, None, "push", ["open"])[0]
    tmp = ctx.settings.data_dir
    first, second = tmp / "a.carton", tmp / "b.carton"
    first.write_bytes(make_carton({"w.bin": SECRET}, model_name="bert"))
    second.write_bytes(make_carton({"w.bin": SECRET, "x": b"open"}, model_name="gpt"))
    with RegistryClient(live_server.url, acme) as c:
        push_carton(c, first, namespace="acme")
    with RegistryClient(live_server.url, admin) as c:
        before = c.request("GET", "/api/v1/stats").json()["stored_bytes"]
    with RegistryClient(live_server.url, b) as c:
        outcome = push_carton(c, second, namespace="open")
        assert outcome.response["model_name"] == "open/gpt"
        sent = c.bytes_sent
    assert outcome.tally.moved >= len(SECRET)  # B sent A's bytes: it could not know
    assert sent < 2 * len(SECRET)  # ... once
    with RegistryClient(live_server.url, admin) as c:
        after = c.request("GET", "/api/v1/stats").json()["stored_bytes"]
    assert after - before < len(SECRET) // 4  # storage did not grow by them
    with RegistryClient(live_server.url, b) as c:  # pushed again: nothing to send
        again = push_carton(c, second, namespace="open")
        assert again.tally.moved == 0
