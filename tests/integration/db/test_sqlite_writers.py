"""SQLite writers of one process queue on a lock before SQLite's own (``db.engine``): a
writer waits there, not in SQLite's polling busy handler, and starts when the one before
it ends; the queue never turns into a lock SQLite would not have."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, event, text

from registry.db import engine as db_engine
from registry.db.engine import core_transaction, make_engine, make_sessionmaker, transaction

WAIT = 10.0  # seconds a step may take before the test fails (never reached when it works)


@pytest.fixture
def sqlite_engine(tmp_path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'writers.db'}")
    with core_transaction(engine) as connection:
        connection.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, who TEXT)"))
    try:
        yield engine
    finally:
        engine.dispose()


def begins_by_thread(engine: Engine) -> dict[str, int]:
    """How many ``BEGIN IMMEDIATE`` each thread sent to SQLite (by thread name)."""
    sent: dict[str, int] = {}

    def count(_conn, _cursor, statement, _parameters, _context, _many) -> None:
        if statement == "BEGIN IMMEDIATE":
            name = threading.current_thread().name
            sent[name] = sent.get(name, 0) + 1

    event.listen(engine, "before_cursor_execute", count)
    return sent


def test_a_writer_waits_in_the_queue_not_in_sqlite_and_starts_when_the_first_ends(
    sqlite_engine,
) -> None:
    begins = begins_by_thread(sqlite_engine)
    first_in, let_first_go = threading.Event(), threading.Event()
    second_about_to_write, second_done = threading.Event(), threading.Event()

    def first() -> None:
        with core_transaction(sqlite_engine) as connection:
            connection.execute(text("INSERT INTO t (who) VALUES ('first')"))
            first_in.set()
            assert let_first_go.wait(WAIT)

    def second() -> None:
        second_about_to_write.set()
        with core_transaction(sqlite_engine) as connection:
            connection.execute(text("INSERT INTO t (who) VALUES ('second')"))
        second_done.set()

    one = threading.Thread(target=first, name="first")
    two = threading.Thread(target=second, name="second")
    one.start()
    assert first_in.wait(WAIT)
    two.start()
    assert second_about_to_write.wait(WAIT)
    # Without the queue the second writer would be polling SQLite by now (BEGIN sent).
    assert not second_done.wait(0.3)
    assert "second" not in begins
    let_first_go.set()
    assert second_done.wait(WAIT)
    one.join(WAIT)
    two.join(WAIT)
    assert begins == {"first": 1, "second": 1}
    with sqlite_engine.connect() as connection:
        who = connection.execute(text("SELECT who FROM t ORDER BY id")).scalars().all()
    assert who == ["first", "second"]


def test_orm_transactions_queue_too_and_a_failed_one_frees_the_queue(sqlite_engine) -> None:
    sessions = make_sessionmaker(sqlite_engine)
    lock = db_engine._writer_lock(sqlite_engine)
    assert lock is not None
    with transaction(sessions) as session:
        assert lock.locked()
        session.execute(text("INSERT INTO t (who) VALUES ('orm')"))
    assert not lock.locked()
    with pytest.raises(RuntimeError), core_transaction(sqlite_engine) as connection:
        connection.execute(text("INSERT INTO t (who) VALUES ('rolled back')"))
        raise RuntimeError("the caller failed mid-transaction")
    assert not lock.locked()
    with sqlite_engine.connect() as connection:
        who = connection.execute(text("SELECT who FROM t")).scalars().all()
    assert who == ["orm"]  # the failed one rolled back


def test_a_writer_that_waited_its_busy_timeout_goes_on_to_sqlite(
    sqlite_engine, monkeypatch
) -> None:
    """A holder stuck in the queue (here: the test holding the lock with no transaction)
    delays a writer by the busy timeout at most; SQLite then lets it write."""
    monkeypatch.setattr(db_engine, "SQLITE_BUSY_SECONDS", 0.05)
    lock = db_engine._writer_lock(sqlite_engine)
    assert lock is not None
    assert lock.acquire(timeout=WAIT)
    try:
        with core_transaction(sqlite_engine) as connection:
            connection.execute(text("INSERT INTO t (who) VALUES ('went on')"))
        assert lock.locked()  # still the test's: a writer releases only what it took
    finally:
        lock.release()
    with sqlite_engine.connect() as connection:
        assert connection.execute(text("SELECT who FROM t")).scalars().all() == ["went on"]


def test_one_queue_per_sqlite_file_and_none_elsewhere(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    absolute = make_engine(f"sqlite:///{tmp_path / 'same.db'}")
    relative = make_engine("sqlite:///same.db")
    other = make_engine(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        lock = db_engine._writer_lock(absolute)
        assert lock is not None
        assert db_engine._writer_lock(relative) is lock
        assert db_engine._writer_lock(other) not in (None, lock)
    finally:
        for engine in (absolute, relative, other):
            engine.dispose()
    assert db_engine._writer_lock(create_engine("sqlite://")) is None  # in memory
    postgres = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    assert db_engine._writer_lock(postgres) is None  # Postgres has row locks; never connected


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")
def test_a_forked_child_does_not_inherit_a_held_queue(sqlite_engine) -> None:
    """A server forking its workers while a thread writes: the child starts unqueued."""
    lock = db_engine._writer_lock(sqlite_engine)
    assert lock is not None
    assert lock.acquire(timeout=WAIT)
    try:
        pid = os.fork()
        if pid == 0:  # the child: exit at once, reporting what it sees
            child = db_engine._writer_lock(sqlite_engine)
            os._exit(0 if child is not None and child is not lock and not child.locked() else 1)
        _, status = os.waitpid(pid, 0)
    finally:
        lock.release()
    assert os.waitstatus_to_exitcode(status) == 0
