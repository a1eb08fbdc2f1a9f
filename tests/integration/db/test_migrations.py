"""Alembic migrations are the only way the schema is made: up, check, down, up."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from registry.db.engine import make_engine
from registry.db.migrate import check, downgrade, upgrade
from registry.db.tables import Base
from tests.conftest import PG_ADMIN_URL, _skip_or_fail


@pytest.fixture
def scratch_postgres_url() -> Iterator[str]:
    try:
        admin = make_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        _skip_or_fail(f"Postgres not reachable at {PG_ADMIN_URL}: {exc}")
    name = f"registry_migr_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"{PG_ADMIN_URL.rpartition('/')[0]}/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _round_trip(url: str) -> None:
    engine = make_engine(url)
    try:
        upgrade(engine)
        check(engine)  # raises if tables.py and the migrations disagree
        tables = set(inspect(engine).get_table_names())
        assert {t.name for t in Base.metadata.sorted_tables} <= tables
        downgrade(engine, "base")
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
        upgrade(engine)
        check(engine)
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgres_upgrade_check_downgrade_upgrade(scratch_postgres_url: str) -> None:
    _round_trip(scratch_postgres_url)


def test_sqlite_upgrade_check_downgrade_upgrade(tmp_path) -> None:
    _round_trip(f"sqlite:///{tmp_path / 'registry.db'}")


@pytest.mark.postgres
def test_postgres_enforces_digest_format(scratch_postgres_url: str) -> None:
    engine = make_engine(scratch_postgres_url)
    try:
        upgrade(engine)
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO blobs (sha256, size, crc32, created_at) VALUES (:s, 1, 1, now())"
                ),
                {"s": "Z" * 64},
            )
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO blobs (sha256, size, crc32, created_at) VALUES (:s, 1, 1, now())"
                ),
                {"s": "ab"},
            )
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO blobs (sha256, size, crc32, created_at) VALUES (:s, 1, 1, now())"
                ),
                {"s": "a" * 64},
            )
    finally:
        engine.dispose()


def _concurrent_upgrades(url: str, processes: int = 3) -> None:
    """Several servers starting at once (separate processes, as in production)."""
    import subprocess
    import sys

    code = (
        "import sys; from registry.db.engine import make_engine; "
        "from registry.db.migrate import upgrade; upgrade(make_engine(sys.argv[1]))"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, url], stderr=subprocess.PIPE)
        for _ in range(processes)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    engine = make_engine(url)
    check(engine)
    engine.dispose()


def test_concurrent_upgrades_sqlite(tmp_path) -> None:
    _concurrent_upgrades(f"sqlite:///{tmp_path / 'registry.db'}")


def test_sqlite_upgrade_is_one_transaction(tmp_path) -> None:
    """Another server never sees a half-migrated SQLite database: Alembic commits after
    each revision on SQLite (no transactional DDL, it says), which let a second server
    read revision 0005 between two of the first one's commits and then fail to stamp
    its own upgrade (CI, 2026-11-25)."""
    import sqlite3
    import threading

    from registry.db.migrate import revisions

    path = tmp_path / "registry.db"
    engine = make_engine(f"sqlite:///{path}")
    with engine.connect():
        pass  # creates the file in WAL mode, so the reader below never blocks
    seen: set[str | None] = set()
    done = threading.Event()

    def poll() -> None:
        reader = sqlite3.connect(path, timeout=30)
        while not done.is_set():
            try:
                rows = reader.execute("SELECT version_num FROM alembic_version").fetchall()
            except sqlite3.OperationalError:  # no table yet
                rows = [(None,)]
            seen.update(row[0] for row in rows)
        reader.close()

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        upgrade(engine)
    finally:
        done.set()
        poller.join()
    _, head = revisions(engine)
    engine.dispose()
    assert seen <= {None, head}, f"a reader saw revisions {sorted(map(str, seen))}"
    assert seen, "the reader never read"


@pytest.mark.postgres
def test_concurrent_upgrades_postgres(scratch_postgres_url: str) -> None:
    _concurrent_upgrades(scratch_postgres_url)


def _trigram_indexes(engine) -> set[str]:
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT indexname FROM pg_indexes WHERE indexname LIKE '%_trgm'"))
        return {name for (name,) in rows}


TRIGRAM_INDEXES = {"ix_models_search_text_trgm", "ix_model_search_tokens_tokens_trgm"}


@pytest.mark.postgres
def test_postgres_search_uses_trigram_indexes(scratch_postgres_url: str) -> None:
    """The LIKE forms search emits are ones a gin_trgm_ops index can answer."""
    from sqlalchemy import select

    from registry.db.tables import Model
    from registry.services.search import search_conditions

    engine = make_engine(scratch_postgres_url)
    try:
        upgrade(engine)
        assert _trigram_indexes(engine) == TRIGRAM_INDEXES
        for q in ("zebra", "input:int64 dtype:float32", "runner:torch*"):
            query = select(Model.id).where(*search_conditions(q)).compile(dialect=engine.dialect)
            with engine.connect() as conn:
                # Empty tables: rule out the scans that would win there anyway.
                conn.execute(text("SET enable_seqscan = off; SET enable_indexscan = off"))
                rows = conn.exec_driver_sql("EXPLAIN " + str(query), query.params)
                plan = "\n".join(row[0] for row in rows)
            assert "_trgm" in plan, plan
        downgrade(engine, "0005")
        assert _trigram_indexes(engine) == set()
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgres_without_pg_trgm_rights_still_migrates(scratch_postgres_url: str) -> None:
    """A role that may not create extensions gets a working schema and a warning."""
    role = f"registry_limited_{uuid.uuid4().hex[:6]}"
    admin = make_engine(scratch_postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE ROLE "{role}" LOGIN'))
        conn.execute(text(f'GRANT ALL ON SCHEMA public TO "{role}"'))
    base, _, name = scratch_postgres_url.rpartition("/")
    scheme, _, host = base.partition("://")
    limited_url = f"{scheme}://{role}@{host.rpartition('@')[2]}/{name}"
    engine = make_engine(limited_url)
    try:
        upgrade(engine)
        check(engine)
        assert _trigram_indexes(engine) == set()
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM models")).scalar_one() == 0
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP OWNED BY "{role}"'))
            conn.execute(text(f'DROP ROLE "{role}"'))
        admin.dispose()


def test_sqlite_connections_cap_their_page_cache(tmp_path) -> None:
    """Every pooled connection keeps at most SQLITE_CACHE_KIB of pages: a worker pools
    dozens, and in WAL mode a busy server's caches are dropped at each write anyway."""
    from registry.db.engine import SQLITE_CACHE_KIB, make_engine

    engine = make_engine(f"sqlite:///{tmp_path / 'cache.db'}")
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA cache_size").scalar() == -SQLITE_CACHE_KIB
    finally:
        engine.dispose()


def test_sqlite_connections_keep_few_prepared_statements(tmp_path, monkeypatch) -> None:
    """An IN over a batch is a new statement per batch length: a connection keeps only
    SQLITE_CACHED_STATEMENTS of them, not Python's 128 (a push's worker grew with them)."""
    from sqlite3 import dbapi2  # what SQLAlchemy's pysqlite dialect connects with

    from registry.db.engine import SQLITE_CACHED_STATEMENTS, make_engine

    opened: list[dict] = []
    connect = dbapi2.connect

    def recording_connect(*args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(kwargs)
        return connect(*args, **kwargs)

    monkeypatch.setattr(dbapi2, "connect", recording_connect)
    engine = make_engine(f"sqlite:///{tmp_path / 'statements.db'}")
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    finally:
        engine.dispose()
    assert opened and all(k.get("cached_statements") == SQLITE_CACHED_STATEMENTS for k in opened)
