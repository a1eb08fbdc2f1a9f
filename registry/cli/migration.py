"""Migrating the database: ``db upgrade``, and ``serve``'s migration before its workers start.

``serve`` with several workers migrates in a spawned child, so that SQLAlchemy, Alembic
and the tables never load into the supervisor, which outlives the migration by the
server's lifetime. Errors the driver raises come back as their first line.
"""

from __future__ import annotations

import argparse
import sys

from registry.settings import Settings, redact_url


class DatabaseUnusable(Exception):
    """The database could not be migrated (the message: the driver's first line)."""


def database_cause(exc: BaseException) -> str | None:
    """The first line of what the driver said, if ``exc`` is SQLAlchemy's (or came back
    from the migrating child as ``DatabaseUnusable``); else None."""
    if isinstance(exc, DatabaseUnusable):
        return str(exc)
    if "sqlalchemy" not in sys.modules:
        return None
    from registry.db.engine import UnsupportedDatabase

    if isinstance(exc, UnsupportedDatabase):
        return str(exc)
    from sqlalchemy.exc import SQLAlchemyError

    if not isinstance(exc, SQLAlchemyError):
        return None
    return str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]


def migrate_in_child(settings: Settings) -> None:
    """Migrate in a short-lived child: SQLAlchemy, Alembic and the tables (about 30 MiB)
    stay out of the supervisor, which outlives the migration by the server's lifetime."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as child:
        cause = child.submit(_migrate, settings.database_url).result()
    if cause is not None:
        raise DatabaseUnusable(cause)


def _migrate(database_url: str) -> str | None:
    """Upgrade the database; what the driver said when it could not, else None."""
    from registry.db.engine import make_engine
    from registry.db.migrate import upgrade

    try:
        engine = make_engine(database_url)
        try:
            upgrade(engine)
        finally:
            engine.dispose()
    except Exception as exc:
        cause = database_cause(exc)
        if cause is None:
            raise
        return cause
    return None


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    from alembic.runtime.migration import MigrationContext

    from registry.db.engine import make_engine
    from registry.db.migrate import upgrade

    settings = Settings.from_env()
    engine = make_engine(settings.database_url)
    try:
        upgrade(engine)
        with engine.connect() as conn:
            revision = MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
    print(f"database {redact_url(settings.database_url)} at revision {revision}")
    return 0
