"""Every route carries the auth guard DESIGN.md "Auth scopes" asks for (read off the route table).

A new write route that forgets ``guards=[require_push]`` (or a new router outside
the guarded one) fails here, without a request being made.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from litestar import Litestar
from litestar.handlers import HTTPRouteHandler
from litestar.routes import HTTPRoute

from registry.app import create_app
from registry.http.auth import required_scope
from registry.services.context import RegistryContext
from registry.settings import Settings

ANONYMOUS = {"/healthz", "/metrics"}
READ_METHODS = {"GET", "HEAD", "OPTIONS"}
# POSTs that only read: Triton clients send their queries as POST bodies.
READ_POSTS = {
    "/v2/repository/index",
    "/v2/models/{name:str}/self_tests/{index:int}/verify",
    "/v2/models/{name:str}/versions/{version:str}/self_tests/{index:int}/verify",
    # infer changes nothing: a 404 saying inference runs in Triton
    "/v2/models/{name:str}/infer",
    "/v2/models/{name:str}/versions/{version:str}/infer",
}
SHA = "0" * 64


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Litestar]:
    """The real app; its database is never touched (routing needs none)."""
    data_dir: Path = tmp_path_factory.mktemp("guards")
    ctx = RegistryContext.open(Settings(data_dir=data_dir, blob_store="memory://"))
    try:
        yield create_app(ctx=ctx)
    finally:
        ctx.close()


def handlers(app: Litestar) -> list[tuple[str, str, HTTPRouteHandler]]:
    """(path template, method, handler) for every HTTP route of the app."""
    out = []
    for route in app.routes:
        if isinstance(route, HTTPRoute):
            for handler in route.route_handlers:
                out += [(route.path, method, handler) for method in handler.http_methods]
    return out


def scope_for(app: Litestar, mode: str, method: str, path: str) -> str | None:
    _, handler, *_ = app.asgi_router.handle_routing(path, method)
    return required_scope(mode, handler)


def test_the_route_table_is_walked(app):
    table = {(path, method) for path, method, _ in handlers(app)}
    assert ("/api/v1/cartons", "POST") in table
    assert ("/v2/repository/models/{name:str}/load", "POST") in table
    assert ("/healthz", "GET") in table


def test_every_write_route_needs_push_and_every_delete_needs_delete(app):
    writes = [
        (path, method, handler)
        for path, method, handler in handlers(app)
        if method not in READ_METHODS and path not in READ_POSTS
    ]
    assert len(writes) >= 9
    admin_only = {("/api/v1/namespaces/{namespace:str}", "PUT")}  # a global admin's
    for path, method, handler in writes:
        for mode in ("write", "all"):
            needed = "delete" if method == "DELETE" else "push"
            if (path, method) in admin_only:
                needed = "admin"
            assert required_scope(mode, handler) == needed, (mode, method, path)


def test_every_route_but_health_and_metrics_needs_pull_under_all(app):
    for path, method, handler in handlers(app):
        if path in ANONYMOUS:
            assert required_scope("all", handler) is None, (method, path)
        else:
            assert required_scope("all", handler) is not None, (method, path)
        assert required_scope("off", handler) is None, (method, path)


def test_scope_rules(app):
    assert scope_for(app, "off", "DELETE", "/api/v1/models/m") is None
    assert scope_for(app, "write", "GET", "/api/v1/models") is None
    assert scope_for(app, "write", "POST", "/api/v1/blobs/missing") == "push"
    assert scope_for(app, "write", "DELETE", "/api/v1/models/m/versions/1") == "delete"
    assert scope_for(app, "write", "POST", "/v2/repository/models/m/load") == "push"
    assert scope_for(app, "write", "POST", "/v2/repository/index") is None
    assert scope_for(app, "all", "POST", "/v2/repository/index") == "pull"
    assert scope_for(app, "all", "GET", "/blobs/" + SHA) == "pull"
    assert scope_for(app, "all", "GET", "/api/openapi/openapi.json") == "pull"
    assert scope_for(app, "all", "OPTIONS", "/api/v1/models") == "pull"
    assert scope_for(app, "all", "GET", "/healthz") is None
    assert scope_for(app, "all", "GET", "/metrics") is None
