"""serve's bind safety check and db upgrade."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from registry.cli import main

WORKER_ENV = ("REGISTRY_PUBLIC_URL", "REGISTRY_MIGRATE_ON_START", "PROMETHEUS_MULTIPROC_DIR")


def _clean_env(monkeypatch, tmp_path):
    for name in (
        "REGISTRY_AUTH",
        "REGISTRY_ALLOW_INSECURE_BIND",
        "REGISTRY_PUBLIC_URL",
        "REGISTRY_DATABASE_URL",
        "REGISTRY_BLOB_STORE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REGISTRY_DATA_DIR", str(tmp_path / "data"))


def test_serve_refuses_public_bind_without_auth(monkeypatch, tmp_path, capsys):
    _clean_env(monkeypatch, tmp_path)
    started = []
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: started.append((a, k)))
    assert main(["serve", "--host", "0.0.0.0", "--port", "8999"]) == 2
    err = capsys.readouterr().err
    assert "REGISTRY_AUTH" in err and "REGISTRY_ALLOW_INSECURE_BIND" in err
    assert started == []
    assert not (tmp_path / "data").exists()


def test_serve_public_bind_allowed_with_auth_or_override(monkeypatch, tmp_path):
    _clean_env(monkeypatch, tmp_path)
    calls = []
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda app, **k: calls.append(k))
    monkeypatch.setenv("REGISTRY_ALLOW_INSECURE_BIND", "true")
    assert main(["serve", "--host", "0.0.0.0", "--port", "8999"]) == 0
    assert calls[-1]["host"] == "0.0.0.0" and calls[-1]["port"] == 8999
    assert calls[-1]["proxy_headers"] is True
    # migrated on start (REGISTRY_MIGRATE_ON_START defaults to true)
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'data' / 'registry.db'}")
    assert "alembic_version" in sa.inspect(engine).get_table_names()
    engine.dispose()


def test_serve_loopback_defaults_public_url(monkeypatch, tmp_path):
    _clean_env(monkeypatch, tmp_path)
    seen = {}
    import uvicorn

    import registry.app

    real_create_app = registry.app.create_app

    def spy(settings=None, ctx=None):
        seen["settings"] = settings
        return real_create_app(settings, ctx)

    monkeypatch.setattr(registry.app, "create_app", spy)
    monkeypatch.setattr(uvicorn, "run", lambda app, **k: None)
    assert main(["serve", "--port", "8123", "--workers", "1"]) == 0
    assert seen["settings"].public_url == "http://127.0.0.1:8123"


def test_serve_workers_get_the_public_url_and_one_migration(monkeypatch, tmp_path):
    """Workers build the app from the environment serve prepares; it is restored after."""
    _clean_env(monkeypatch, tmp_path)
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    import os

    import uvicorn

    calls = []

    def run(app, **kwargs):
        calls.append((app, kwargs, {k: os.environ.get(k) for k in WORKER_ENV}))

    monkeypatch.setattr(uvicorn, "run", run)
    assert main(["serve", "--port", "8124", "--workers", "3"]) == 0
    app, kwargs, env = calls[-1]
    assert app == "registry.worker:worker_app" and kwargs["factory"] is True
    assert kwargs["workers"] == 3 and kwargs["proxy_headers"] is True
    assert env["REGISTRY_PUBLIC_URL"] == "http://127.0.0.1:8124"
    assert env["REGISTRY_MIGRATE_ON_START"] == "false"  # serve migrated once, before them
    assert env["PROMETHEUS_MULTIPROC_DIR"] and os.path.isdir(env["PROMETHEUS_MULTIPROC_DIR"])
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'data' / 'registry.db'}")
    assert "alembic_version" in sa.inspect(engine).get_table_names()
    engine.dispose()
    assert all(os.environ.get(k) is None for k in WORKER_ENV)


def test_serve_runs_granian_workers_when_asked(monkeypatch, tmp_path):
    _clean_env(monkeypatch, tmp_path)
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    import os

    import granian.server

    started = []

    class FakeServer:
        def __init__(self, target, **options):
            env = {k: os.environ.get(k) for k in WORKER_ENV}
            started.append((target, options, env))

        def serve(self):
            pass

    monkeypatch.setattr(granian.server, "Server", FakeServer)
    assert main(["serve", "--port", "8125", "--workers", "2", "--server", "granian"]) == 0
    target, options, env = started[-1]
    assert target == "registry.worker:worker_app" and options["factory"] is True
    assert options["workers"] == 2 and options["port"] == 8125
    assert env["REGISTRY_PUBLIC_URL"] == "http://127.0.0.1:8125"
    assert env["PROMETHEUS_MULTIPROC_DIR"]
    assert all(os.environ.get(k) is None for k in WORKER_ENV)


def test_serve_rejects_zero_workers(monkeypatch, tmp_path, capsys):
    _clean_env(monkeypatch, tmp_path)
    assert main(["serve", "--workers", "0"]) == 2
    assert "--workers" in capsys.readouterr().err


def test_db_upgrade_on_a_fresh_database(monkeypatch, tmp_path, capsys):
    _clean_env(monkeypatch, tmp_path)
    url = f"sqlite:///{tmp_path / 'fresh' / 'registry.db'}"
    monkeypatch.setenv("REGISTRY_DATABASE_URL", url)
    assert main(["db", "upgrade"]) == 0
    out = capsys.readouterr().out
    assert "revision" in out
    engine = sa.create_engine(url)
    tables = set(sa.inspect(engine).get_table_names())
    engine.dispose()
    assert {
        "alembic_version",
        "blobs",
        "cartons",
        "carton_files",
        "models",
        "versions",
        "tags",
    } <= tables
    # idempotent
    assert main(["db", "upgrade"]) == 0


def test_a_worker_freezes_what_building_its_app_made(tmp_path):
    """A worker's startup objects are out of the cyclic collector's reach (a fresh
    process: freezing is for the whole of one)."""
    import os
    import subprocess
    import sys

    code = (
        "import gc\n"
        "from registry.worker import worker_app\n"
        "assert gc.get_freeze_count() == 0\n"
        "worker_app()\n"
        "print(gc.get_freeze_count())\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REGISTRY_", "PROMETHEUS_"))}
    env["REGISTRY_DATA_DIR"] = str(tmp_path / "data")
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) > 50_000  # modules, classes, the app


def test_a_worker_loads_only_what_serving_needs(tmp_path):
    """Building a worker's app imports neither the command line, nor numpy (only tensor
    values need it), nor the migrations (serve ran them), nor httpx's own command-line
    client: each would be held by every worker for its lifetime (issue 27, figure 6)."""
    import os
    import subprocess
    import sys

    unwanted = ["registry.cli", "numpy", "alembic", "mako", "rich", "pygments"]
    code = (
        "import sys\n"
        "from registry.worker import worker_app\n"
        "worker_app()\n"
        f"print(' '.join(m for m in {unwanted!r} if m in sys.modules))\n"
        "print('registry.services.ingest' in sys.modules, 'httpx' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REGISTRY_", "PROMETHEUS_"))}
    env["REGISTRY_DATA_DIR"] = str(tmp_path / "data")
    env["REGISTRY_MIGRATE_ON_START"] = "false"  # as serve starts its workers
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    loaded, served = done.stdout.splitlines()
    assert loaded == ""
    assert served == "True True"  # the app was built: the push path and link fetching are in


def test_serve_says_when_pythons_sqlite_is_too_old(monkeypatch, tmp_path, capsys):
    """The chunk claims need RETURNING (SQLite 3.35): an older SQLite stops serve at
    once with one line saying so, not a failed first push."""
    _clean_env(monkeypatch, tmp_path)
    import sqlite3

    import uvicorn

    started = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: started.append(a))
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 31, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.31.1")
    assert main(["serve", "--port", "8125", "--workers", "1"]) == 1
    err = capsys.readouterr().err
    assert "this Python's SQLite is 3.31.1; the registry needs 3.35.0 or newer" in err
    assert "REGISTRY_DATABASE_URL" in err
    assert started == []


def test_an_sqlite_without_json_each_is_refused_with_the_reason(monkeypatch):
    import sqlite3

    from registry.db import engine

    class NoJson:
        def __init__(self, *_args):
            pass

        def execute(self, _sql):
            raise sqlite3.OperationalError("no such table: json_each")

        def close(self):
            pass

    monkeypatch.setattr(sqlite3, "connect", NoJson)
    with pytest.raises(engine.UnsupportedDatabase, match="built without its JSON functions"):
        engine.check_sqlite()
