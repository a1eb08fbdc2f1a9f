"""Auth: scopes on every write route (AUTH=write), reads under AUTH=all, tokens stored hashed."""

from __future__ import annotations

import hashlib
import struct

import pytest
from sqlalchemy import select

from registry.db.tables import ApiToken
from registry.services.auth import (
    authenticate,
    create_token,
    expand_scopes,
    list_tokens,
    revoke_token,
)
from registry.services.cut_upload import CUT_FILES_TYPE
from tests.integration.ops.helpers import make_carton, sha

MODEL = "ops-model"
NEW_BLOB = b"a blob uploaded on its own"
SEVERAL = bytes(range(256)) * 1024  # 256 KiB: over min_file_bytes, sent in 64 KiB chunks
SEVERAL_BODY = (
    hashlib.sha256(SEVERAL).digest()
    + struct.pack(">Q", len(SEVERAL))
    + b"".join(
        struct.pack(">I", 64 * 1024) + SEVERAL[at : at + 64 * 1024]
        for at in range(0, len(SEVERAL), 64 * 1024)
    )
)


def bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def tokens(ctx) -> dict[str, str]:
    return {
        scope: create_token(ctx, None, scope)[0] for scope in ("pull", "push", "delete", "admin")
    }


def seed(client, admin: str) -> str:
    """Model ``ops-model`` version 1 with tag ``prod``; returns its manifest hash."""
    r = client.post("/api/v1/cartons", content=make_carton({"w": b"v1"}), headers=bearer(admin))
    assert r.status_code == 201, r.text
    r2 = client.put(f"/api/v1/models/{MODEL}/tags/prod", json={"version": 1}, headers=bearer(admin))
    assert r2.status_code == 200, r2.text
    return r.json()["manifest_sha256"]


# (name, scope needed, request kwargs, expected success status)
WRITE_ROUTES = [
    (
        "push carton",
        "push",
        ("POST", "/api/v1/cartons"),
        {"content": make_carton({"w": b"v2"})},
        201,
    ),
    (
        "blobs missing",
        "push",
        ("POST", "/api/v1/blobs/missing"),
        {"json": {"sha256": [sha(b"x")]}},
        200,
    ),
    ("put blob", "push", ("PUT", f"/api/v1/blobs/{sha(NEW_BLOB)}"), {"content": NEW_BLOB}, 201),
    (
        "post blobs",
        "push",
        ("POST", "/api/v1/blobs"),
        {"content": SEVERAL_BODY, "headers": {"Content-Type": CUT_FILES_TYPE}},
        201,
    ),
    (
        "put tag",
        "push",
        ("PUT", f"/api/v1/models/{MODEL}/tags/stable"),
        {"json": {"version": 1}},
        200,
    ),
    ("delete tag", "delete", ("DELETE", f"/api/v1/models/{MODEL}/tags/prod"), {}, 200),
    ("delete version", "delete", ("DELETE", f"/api/v1/models/{MODEL}/versions/1"), {}, 200),
    ("delete model", "delete", ("DELETE", f"/api/v1/models/{MODEL}"), {}, 200),
    ("v2 load", "push", ("POST", f"/v2/repository/models/{MODEL}/load"), {"json": {}}, 200),
    ("v2 unload", "push", ("POST", f"/v2/repository/models/{MODEL}/unload"), {"json": {}}, 200),
]
BELOW = {"push": "pull", "delete": "push"}


def route_exists(client, method: str, path: str) -> bool:
    try:
        client.app.asgi_router.handle_routing(path, method)
    except Exception:
        return False
    return True


@pytest.mark.settings(auth="write")
@pytest.mark.parametrize(
    ("scope", "request_line", "kwargs", "ok_status"),
    [r[1:] for r in WRITE_ROUTES],
    ids=[r[0] for r in WRITE_ROUTES],
)
def test_write_route_scopes(ops_client, registry_ctx, scope, request_line, kwargs, ok_status):
    method, path = request_line
    assert route_exists(ops_client, method, path), f"{method} {path} is not routed"
    keys = tokens(registry_ctx)
    seed(ops_client, keys["admin"])

    def call(token: str | None):
        extra = dict(kwargs)
        headers = {**extra.pop("headers", {}), **bearer(token)}
        return ops_client.request(method, path, headers=headers, **extra)

    anonymous = call(None)
    assert anonymous.status_code == 401, anonymous.text
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    assert "error" in anonymous.json()

    unknown = call("crt_" + "x" * 43)
    assert unknown.status_code == 401 and "invalid" in unknown.json()["error"]
    assert call("not-even-a-token").status_code == 401

    weak = call(keys[BELOW[scope]])
    assert weak.status_code == 403, weak.text
    assert scope in weak.json()["error"]
    assert 'error="insufficient_scope"' in weak.headers["www-authenticate"]

    good = call(keys[scope])
    assert good.status_code == ok_status, good.text


@pytest.mark.settings(auth="write")
def test_reads_anonymous_under_write(ops_client, registry_ctx):
    keys = tokens(registry_ctx)
    manifest = seed(ops_client, keys["admin"])
    assert ops_client.get("/api/v1/models").status_code == 200
    assert ops_client.get(f"/api/v1/cartons/{manifest}").status_code == 200
    assert ops_client.get("/api/v1/stats").status_code == 200
    assert ops_client.get("/healthz").status_code == 200
    assert ops_client.get("/metrics").status_code == 200


@pytest.mark.settings(auth="all")
def test_reads_need_pull_under_all(ops_client, registry_ctx):
    keys = tokens(registry_ctx)
    manifest = seed(ops_client, keys["admin"])
    for path in ("/api/v1/models", f"/api/v1/cartons/{manifest}", "/api/v1/stats"):
        r = ops_client.get(path)
        assert r.status_code == 401, path
        assert r.headers["www-authenticate"].startswith("Bearer")
        assert ops_client.get(path, headers=bearer("crt_nope")).status_code == 401
        for scope in ("pull", "push", "delete", "admin"):
            assert ops_client.get(path, headers=bearer(keys[scope])).status_code == 200, (
                path,
                scope,
            )
    assert ops_client.get("/healthz").status_code == 200
    assert ops_client.get("/healthz", params={"ready": 1}).status_code == 200
    assert ops_client.get("/metrics").status_code == 200
    # writes still need push (and deletes delete) under all
    r = ops_client.post("/api/v1/blobs/missing", json={"sha256": []}, headers=bearer(keys["pull"]))
    assert r.status_code == 403


@pytest.mark.settings(auth="all")
def test_pages_docs_and_downloads_need_pull_under_all(ops_client, registry_ctx):
    keys = tokens(registry_ctx)
    manifest = seed(ops_client, keys["admin"])
    for path in ("/", "/api/openapi/openapi.json", f"/cartons/{manifest}.carton", "/stats"):
        r = ops_client.get(path)
        assert r.status_code == 401, path
        assert r.headers["www-authenticate"].startswith("Bearer"), path
        assert ops_client.get(path, headers=bearer(keys["pull"])).status_code == 200, path
    page = ops_client.get("/", headers={"Accept": "text/html"})
    assert page.status_code == 401 and page.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.settings(auth="write")
def test_revoked_token_is_refused(ops_client, registry_ctx):
    token, info = create_token(registry_ctx, "laptop", "push")
    body = {"sha256": [sha(b"y")]}
    assert (
        ops_client.post("/api/v1/blobs/missing", json=body, headers=bearer(token)).status_code
        == 200
    )
    revoked = revoke_token(registry_ctx, "laptop")
    assert [t.id for t in revoked] == [info.id]
    r = ops_client.post("/api/v1/blobs/missing", json=body, headers=bearer(token))
    assert r.status_code == 401
    assert authenticate(registry_ctx, token) is None
    assert list_tokens(registry_ctx) == []
    assert [t.name for t in list_tokens(registry_ctx, include_revoked=True)] == ["laptop"]


def test_tokens_stored_hashed_and_marked_used(registry_ctx):
    token, info = create_token(registry_ctx, "ci", "delete")
    assert token.startswith("crt_")
    assert info.scopes == ("pull", "push", "delete")
    with registry_ctx.sessions() as s:
        row = s.scalar(select(ApiToken).where(ApiToken.id == info.id))
        dump = " ".join(str(getattr(row, c.key)) for c in ApiToken.__table__.columns)
    assert token not in dump and token[4:] not in dump
    assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert row.last_used_at is None
    assert authenticate(registry_ctx, token) == {"pull", "push", "delete"}
    with registry_ctx.sessions() as s:
        first = s.get(ApiToken, info.id).last_used_at
    assert first is not None
    authenticate(registry_ctx, token)
    with registry_ctx.sessions() as s:
        assert s.get(ApiToken, info.id).last_used_at == first  # at most once a minute
    assert authenticate(registry_ctx, token + "x") is None
    assert authenticate(registry_ctx, None) is None


def test_scope_nesting():
    assert expand_scopes("pull") == {"pull"}
    assert expand_scopes("admin") == {"pull", "push", "delete", "admin"}


@pytest.mark.parametrize(
    "mode", [pytest.param(m, marks=pytest.mark.settings(auth=m)) for m in ("off", "write", "all")]
)
def test_whoami_tells_a_client_what_its_token_is_worth(ops_client, registry_ctx, mode):
    """What `login` checks: an unknown token is a 401 even where no token is needed."""
    keys = tokens(registry_ctx)
    r = ops_client.get("/api/v1/whoami", headers=bearer(keys["push"]))
    assert r.status_code == 200, r.text
    assert r.json() == {"auth": mode, "scopes": ["pull", "push"]}
    r = ops_client.get("/api/v1/whoami", headers=bearer("crt_nope"))
    assert r.status_code == 401 and r.json()["error"] == "invalid or revoked token"
    assert "invalid_token" in r.headers["www-authenticate"]
    anonymous = ops_client.get("/api/v1/whoami")
    if mode == "all":
        assert anonymous.status_code == 401
    else:
        assert anonymous.json() == {"auth": mode, "scopes": []}
    revoke_token(registry_ctx, next(t.id for t in list_tokens(registry_ctx) if t.scope == "push"))
    assert ops_client.get("/api/v1/whoami", headers=bearer(keys["push"])).status_code == 401
