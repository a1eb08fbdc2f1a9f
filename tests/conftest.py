"""Shared fixtures: the fixture cartons, and a registry on every backend pair.

``registry_ctx`` runs each test on SQLite + filesystem and on Postgres + S3
(moto's server, or MinIO with REGISTRY_TEST_S3_ENDPOINT). Postgres comes from
REGISTRY_TEST_DATABASE_URL (default: the machine's 127.0.0.1:5432/test); a
fresh database per session is migrated with Alembic, and tables are emptied
between tests. Under CI (CI=true) a missing Postgres or S3 fails, never skips.
"""

from __future__ import annotations

import gc
import os
import shutil
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import Engine, text

from registry.db.engine import make_engine
from registry.db.migrate import upgrade
from registry.db.tables import Base
from registry.services.context import RegistryContext
from registry.settings import Settings
from tests.s3fixtures import running_in_ci, s3_bucket, s3_server  # noqa: F401

if TYPE_CHECKING:
    from litestar import Litestar

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("CARTON_FIXTURES", REPO_ROOT.parent / "shared" / "fixtures"))
REFERENCE = FIXTURES / "reference-packer"
FIXTURE_CARTONS = sorted(REFERENCE.glob("*.carton"))
if not FIXTURE_CARTONS:
    # Parametrized tests over an empty list would pass by running nothing.
    raise pytest.UsageError(
        f"no fixture cartons in {REFERENCE}: the tests need ../shared/fixtures beside the "
        "repository (or CARTON_FIXTURES pointing at a copy)"
    )
PG_ADMIN_URL = os.environ.get(
    "REGISTRY_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


def fixture_carton(prefix: str) -> Path:
    """A reference-packer carton by its number or name prefix, e.g. ``fixture_carton("02")``."""
    matches = [p for p in FIXTURE_CARTONS if p.name.startswith(prefix)]
    assert len(matches) == 1, f"no single fixture carton starts with {prefix!r}"
    return matches[0]


def _skip_or_fail(message: str) -> None:
    if running_in_ci():
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh, migrated Postgres database for this test session."""
    try:
        admin = make_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT", poolclass=None)
        with admin.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        _skip_or_fail(f"Postgres not reachable at {PG_ADMIN_URL}: {exc}")
    # One database per pytest-xdist worker (each is its own session): the worker's name,
    # pid and a random tail keep concurrent sessions, and engineers, apart.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    name = f"registry_test_{worker}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    base, _, _ = PG_ADMIN_URL.rpartition("/")
    url = f"{base}/{name}"
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def empty_all_tables(engine: Engine) -> None:
    """Every row deleted, children first, and the sequences restarted: what TRUNCATE ...
    RESTART IDENTITY did, at a fifth of its cost on tables this small (TRUNCATE makes new
    files for every table and index: 61 ms against 10-13 ms, after each Postgres test)."""
    with engine.begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(table.delete())
        sequences = conn.execute(
            text("SELECT sequencename FROM pg_sequences WHERE schemaname = current_schema()")
        ).scalars()
        for sequence in list(sequences):
            conn.execute(text(f'ALTER SEQUENCE "{sequence}" RESTART'))


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Alembic-migrated SQLite file, copied for each test (migrating is the slow part)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "registry.db"
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    engine.dispose()  # closing the last connection checkpoints the WAL into the file
    return path


BACKENDS = ["sqlite-fs", "postgres-s3"]


def make_settings(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path, **overrides: object
) -> Settings:
    data_dir = tmp_path / "data"
    data_dir.mkdir(exist_ok=True)
    if backend == "sqlite-fs":
        template = request.getfixturevalue("sqlite_template")
        shutil.copy(template, data_dir / "registry.db")
        return Settings(data_dir=data_dir, migrate_on_start=False, **overrides)  # type: ignore[arg-type]
    if backend == "postgres-s3":
        url = request.getfixturevalue("postgres_url")
        bucket = request.getfixturevalue("s3_bucket")
        server = request.getfixturevalue("s3_server")
        for key, value in server.env().items():
            os.environ.setdefault(key, value)
        return Settings(
            data_dir=data_dir,
            database_url=url,
            blob_store=f"s3://{bucket}/registry",
            s3_endpoint_url=server.endpoint_url,
            migrate_on_start=False,
            **overrides,  # type: ignore[arg-type]
        )
    raise ValueError(backend)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    overrides = getattr(request, "param", None) or {}
    marker = request.node.get_closest_marker("settings")
    if marker is not None:
        overrides = {**overrides, **marker.kwargs}
    return make_settings(request, backend, tmp_path, **overrides)


@pytest.fixture
def registry_ctx(settings: Settings) -> Iterator[RegistryContext]:
    ctx = RegistryContext.open(settings)
    try:
        yield ctx
    finally:
        if settings.database_url.startswith("postgresql"):
            empty_all_tables(ctx.engine)
        ctx.close()


@pytest.fixture
def client(registry_ctx: RegistryContext) -> Iterator[object]:
    """An in-process HTTP client for the app (litestar.testing.TestClient)."""
    from litestar.testing import TestClient

    with (
        app_for(registry_ctx) as app,
        TestClient(app, base_url=registry_ctx.settings.public_url) as test_client,
    ):
        yield test_client


# Apps this worker built and no test is using now. Building one is ~85 ms (Litestar's
# handler registration), a third of a typical test's setup; what depends on the registry
# (state, lifespan hooks) is set by registry.app.bind_app, so one app serves test after test.
_IDLE_APPS: list[Litestar] = []


@contextmanager
def app_for(ctx: RegistryContext) -> Iterator[Litestar]:
    """``create_app(ctx=ctx)``, re-using an idle app of this worker when there is one.

    Isolation: routes, handlers and middleware hold no registry state (``bind_app``);
    state and hooks are replaced here on the way in and dropped on the way out. An app
    that came back with anything else a request could leave behind (a Litestar store)
    is not re-used, nor one still held when its user failed (no release).
    """
    from registry.app import bind_app, create_app

    app = bind_app(_IDLE_APPS.pop(), ctx) if _IDLE_APPS else create_app(ctx=ctx)
    yield app
    release_app(app)


def release_app(app: Litestar) -> None:
    """Drop the app's registry (state, hooks) and keep it for the next test, if pristine."""
    from litestar.datastructures import State

    app.state = State()
    app.on_startup, app.on_shutdown = [], []
    if not app.stores._stores and not app.event_emitter.listeners:
        _IDLE_APPS.append(app)


class LiveServer:
    """The app served by uvicorn on 127.0.0.1 in a background thread (for real clients)."""

    port: int
    url: str
    ctx: RegistryContext
    app: Litestar

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self._sock.close()
        if not self.thread.is_alive():  # a server still running keeps its app
            release_app(self.app)


@pytest.fixture
def live_settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    """Settings whose PUBLIC_URL is the live server's own address (LINKS must point at it)."""
    sock = bound_socket()
    request.addfinalizer(sock.close)
    port = sock.getsockname()[1]
    marker = request.node.get_closest_marker("settings")
    overrides = dict(marker.kwargs) if marker is not None else {}
    overrides.setdefault("public_url", f"http://127.0.0.1:{port}")
    settings = make_settings(request, backend, tmp_path, **overrides)
    request.node._live_sock = sock  # held from here to the server: no other test takes it
    return settings


@pytest.fixture
def live_server(request: pytest.FixtureRequest, live_settings: Settings) -> Iterator[LiveServer]:
    """A real HTTP server on 127.0.0.1 whose PUBLIC_URL is its own URL."""
    ctx = RegistryContext.open(live_settings)
    server = start_live_server(ctx, request.node._live_sock)
    try:
        yield server
    finally:
        server.close()
        if live_settings.database_url.startswith("postgresql"):
            empty_all_tables(ctx.engine)
        ctx.close()


def bound_socket() -> socket.socket:
    """A socket bound to a free port of 127.0.0.1, kept until the server listens on it:
    tests running in parallel (pytest-xdist) can never be handed the same port."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def start_live_server(ctx: RegistryContext, sock: socket.socket | None = None) -> LiveServer:
    import threading
    import time

    import uvicorn

    from registry.app import bind_app, create_app
    from registry.http.server import server_options

    server = LiveServer.__new__(LiveServer)
    server.app = bind_app(_IDLE_APPS.pop(), ctx) if _IDLE_APPS else create_app(ctx=ctx)
    sock = sock or bound_socket()
    port = sock.getsockname()[1]
    server.port, server.url, server.ctx, server._sock = port, f"http://127.0.0.1:{port}", ctx, sock
    config = uvicorn.Config(
        server.app, log_level="warning", lifespan="on", **server_options(ctx.settings)
    )
    server.server = uvicorn.Server(config)
    server.thread = threading.Thread(
        target=server.server.run, kwargs={"sockets": [sock]}, daemon=True
    )
    server.thread.start()
    deadline = time.monotonic() + 20
    while not server.server.started:
        if time.monotonic() > deadline or not server.thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    return server


def pytest_collection_finish(session: pytest.Session) -> None:
    """Move what import and collection made (modules, test items: most of the heap) out
    of the garbage collector's sight: each full collection no longer walks it."""
    gc.collect()
    gc.freeze()
