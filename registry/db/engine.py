"""Engines and sessions for SQLite (embedded default) and Postgres (psycopg 3)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

# Execution option marking a write transaction (SQLite: BEGIN IMMEDIATE).
WRITE_OPTION = "registry_write"


def normalize_url(url: str) -> str:
    """``postgresql://`` and ``postgres://`` mean psycopg 3, not psycopg2."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


SQLITE_CACHE_KIB = 256
"""Each SQLite connection's page cache (SQLite's default: 2,000 KiB). A server pools up to
40 connections per worker, each filling its cache as the index grows, and in WAL mode a
cache is dropped whenever another connection wrote, as pushes do all the time: with 256
KiB a 2 GiB push's worker peaked 7-12 MiB lower (issue 27); pages come from the OS's
cache instead."""

SQLITE_CACHED_STATEMENTS = 16
"""Prepared statements each SQLite connection keeps (Python's default: 128). An ``IN``
over a batch renders one statement per batch length, so a push filled every pooled
connection's cache with statements used once: its worker grew all along a 2 GiB push
(issue 27). With 16 it flattened after the first GiB and peaked 7 MiB lower; preparing a
statement again costs tens of microseconds."""


def is_sqlite(engine_or_url: Engine | str) -> bool:
    url = engine_or_url.url if isinstance(engine_or_url, Engine) else make_url(engine_or_url)
    return url.get_backend_name() == "sqlite"


SQLITE_MIN_VERSION = (3, 35, 0)
"""RETURNING (the chunk claims, the index's inserts) needs 3.35; ``json_each`` (a batch's
hashes as one parameter, ``queries.in_list``) is built in from 3.38 and in most builds
before."""


class UnsupportedDatabase(Exception):
    """The database cannot serve the registry (the message says why and what to do)."""


def check_sqlite() -> None:
    """Fail at start, and say why, where Python's SQLite lacks what the registry uses."""
    import sqlite3

    found = sqlite3.sqlite_version
    if sqlite3.sqlite_version_info < SQLITE_MIN_VERSION:
        raise UnsupportedDatabase(
            f"this Python's SQLite is {found}; the registry needs "
            f"{'.'.join(map(str, SQLITE_MIN_VERSION))} or newer (or use Postgres: "
            "REGISTRY_DATABASE_URL)"
        )
    with contextlib.closing(sqlite3.connect(":memory:")) as connection:
        try:
            connection.execute("SELECT value FROM json_each('[1]')").fetchall()
        except sqlite3.OperationalError as exc:
            raise UnsupportedDatabase(
                f"this Python's SQLite ({found}) was built without its JSON functions "
                f"({exc}); the registry needs json_each (or use Postgres: "
                "REGISTRY_DATABASE_URL)"
            ) from None


SQLITE_BUSY_SECONDS = 30
"""How long a SQLite writer waits for the database's write lock (``busy_timeout``)."""

_writer_locks: dict[str, threading.Lock] = {}
_writer_locks_guard = threading.Lock()


def _writer_lock(engine: Engine) -> threading.Lock | None:
    """This process's queue for writing one SQLite file (None: not a SQLite file).

    SQLite has one writer at a time, and a writer that finds the database locked polls
    for it, sleeping 1, 2, 5 ... up to 100 ms between tries (its busy handler): under
    contention the writer that just committed takes the lock again while the others
    sleep. Four threads each running 300 short write transactions: the slowest waited
    0.63-0.93 s polling, 17-18 ms queued here, in the same total time. A push's placing
    and pack-committing threads write in turn all along. Writers of this process wait
    here and are woken as the one before them ends; SQLite's lock still orders them
    against other processes (``serve --workers``, operator commands).
    """
    if engine.url.get_backend_name() != "sqlite":
        return None
    database = engine.url.database
    if not database or database == ":memory:":
        return None
    key = str(Path(database).resolve())
    with _writer_locks_guard:
        return _writer_locks.setdefault(key, threading.Lock())


def _forget_writer_locks() -> None:
    """In a forked child: its parent's other threads are gone, and a queue one of them
    held would never be released."""
    global _writer_locks_guard
    _writer_locks.clear()
    _writer_locks_guard = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_writer_locks)


@contextmanager
def _queued_writer(engine: Engine | None) -> Iterator[None]:
    """``_writer_lock`` held for one write transaction. Only a queue in front of SQLite's
    lock, never a lock of its own: a writer that waited ``SQLITE_BUSY_SECONDS`` here (its
    holder stuck) goes on to SQLite's lock, whose busy timeout then decides as before."""
    lock = _writer_lock(engine) if isinstance(engine, Engine) else None
    held = lock is not None and lock.acquire(timeout=SQLITE_BUSY_SECONDS)
    try:
        yield
    finally:
        if held:
            assert lock is not None
            lock.release()


def make_engine(url: str, **kwargs: Any) -> Engine:
    url = normalize_url(url)
    if url.startswith("sqlite"):
        check_sqlite()
        database = make_url(url).database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        # Enough pooled connections for the worker threads of a busy server: opening
        # one (and its PRAGMAs) per request would cost more than the query.
        kwargs.setdefault("pool_size", 20)
        kwargs.setdefault("max_overflow", 20)
        engine = create_engine(
            url,
            connect_args={
                "timeout": SQLITE_BUSY_SECONDS,
                "check_same_thread": False,
                "cached_statements": SQLITE_CACHED_STATEMENTS,
            },
            **kwargs,
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
            # Autocommit off in the driver so SQLAlchemy's BEGIN is the only one.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_SECONDS * 1000}")
            cursor.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn: Any) -> None:
            # Writers take the lock up front (IMMEDIATE: no deadlock upgrading a read lock);
            # readers begin deferred, so in WAL mode they never wait for a writer.
            if conn.get_execution_options().get(WRITE_OPTION):
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            else:
                conn.exec_driver_sql("BEGIN")

        return engine
    kwargs.setdefault("pool_pre_ping", True)
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 20)
    return create_engine(url, **kwargs)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work that writes: commit on success, roll back on any error.

    Every write goes through here; plain ``factory()`` sessions are for reads.
    """
    with _queued_writer(factory.kw.get("bind")), factory() as session, session.begin():
        session.connection(execution_options={WRITE_OPTION: True})
        yield session


@contextmanager
def core_transaction(engine: Engine) -> Iterator[Connection]:
    """``transaction`` for Core statements only, without an ORM session to set up and
    tear down: a push runs one per batch of about 200 chunks."""
    with _queued_writer(engine), engine.connect() as connection:
        connection.execution_options(**{WRITE_OPTION: True})
        with connection.begin():
            yield connection
