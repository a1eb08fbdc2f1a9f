"""Alembic environment: migrations are the only way the schema is made."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, text

from registry.db.engine import WRITE_OPTION, is_sqlite, make_engine
from registry.db.tables import Base
from registry.settings import Settings

config = context.config
target_metadata = Base.metadata


def _include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    """Trigram indexes exist on Postgres only, when pg_trgm could be had (migration 0009)."""
    return not (type_ == "index" and reflected and (name or "").endswith("_trgm"))


def _configure_and_run(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        # Fail fast instead of queueing behind a long transaction while holding locks.
        connection.execute(text("SET lock_timeout = '10s'"))
        connection.execute(text("SET statement_timeout = '300s'"))
    elif not connection.in_transaction():
        # Alembic runs SQLite (no transactional DDL, it says) one commit per revision:
        # another server starting could read a revision between two commits and then
        # fail to stamp its own upgrade. One BEGIN IMMEDIATE around the whole run makes
        # the transaction external to Alembic, which then never commits; callers do.
        connection.execution_options(**{WRITE_OPTION: True}).begin()
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_object=_include_object,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure_and_run(connection)
        return
    url = config.get_main_option("sqlalchemy.url") or Settings.from_env().database_url
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            if is_sqlite(engine):
                conn.commit()
            _configure_and_run(conn)
            conn.commit()
    finally:
        engine.dispose()


def run_migrations_offline() -> None:
    url = config.get_main_option("sqlalchemy.url") or Settings.from_env().database_url
    context.configure(url=url, target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
