"""The suite re-uses one built app per worker (tests/conftest.py ``app_for``): pointed at
another registry, it must answer from that one only, with that one's settings."""

from __future__ import annotations

from pathlib import Path

from litestar.testing import TestClient

from registry.app import bind_app, create_app
from registry.services.context import RegistryContext
from registry.settings import Settings
from tests.conftest import fixture_carton, release_app


def open_registry(path: Path, **overrides: object) -> RegistryContext:
    settings = Settings(data_dir=path, **overrides)  # type: ignore[arg-type]
    return RegistryContext.open(settings, migrate=True)


def test_a_rebound_app_serves_only_its_new_registry(tmp_path: Path) -> None:
    first = open_registry(tmp_path / "a", scrub_rate=1)
    second = open_registry(tmp_path / "b", max_concurrent_pushes=3)
    try:
        app = create_app(ctx=first)
        # Everything create_app hooks up is bind_app's: no other startup or shutdown hook.
        assert len(app.on_startup) == len(app.on_shutdown) == 1
        with TestClient(app, base_url=first.settings.public_url) as client:
            pushed = client.post("/api/v1/cartons", content=fixture_carton("02").read_bytes())
            assert pushed.status_code == 201
            assert client.get("/api/v1/models").json()["models"]
            sha = pushed.json()["manifest_sha256"]
            assert client.get(f"/api/v1/cartons/{sha}").status_code == 200
        release_app(app)
        assert app.state.dict() == {} and not app.on_startup and not app.on_shutdown

        bind_app(app, second)
        assert app.state.ctx is second and app.on_startup == [] and app.on_shutdown == []
        assert app.state.ingest_gate.slots == 3
        with TestClient(app, base_url=second.settings.public_url) as client:
            assert client.get("/api/v1/models").json()["models"] == []
            assert client.get(f"/api/v1/cartons/{sha}").status_code == 404
    finally:
        first.close()
        second.close()
