"""Run Alembic migrations from code (``serve`` on start, ``db upgrade``)."""

from __future__ import annotations

import threading
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, text

from registry.db.engine import WRITE_OPTION, is_sqlite

# Any fixed 64-bit number: every app server takes the same lock before migrating.
_MIGRATION_LOCK_ID = 0x6361_7274_6F6E_0001 & 0x7FFF_FFFF_FFFF_FFFF
# Alembic's `context` is process-global: one migration command at a time per process.
_ALEMBIC_LOCK = threading.RLock()


def _writer(engine: Engine) -> Connection:
    """A connection marked as a writer: on SQLite its transactions BEGIN IMMEDIATE, so
    several servers migrating at once wait for the lock instead of failing to upgrade it."""
    return engine.connect().execution_options(**{WRITE_OPTION: True})


def alembic_config() -> Config:
    """Configured in code: the migrations ship inside the package as registry.migrations."""
    import registry.migrations

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(registry.migrations.__file__).parent))
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate under a lock so several servers starting at once migrate once."""
    cfg = alembic_config()
    with _ALEMBIC_LOCK, _writer(engine) as conn:
        if not is_sqlite(engine):
            conn.execute(text("SELECT pg_advisory_lock(:id)"), {"id": _MIGRATION_LOCK_ID})
            conn.commit()
        try:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
            conn.commit()
        finally:
            if not is_sqlite(engine):
                conn.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": _MIGRATION_LOCK_ID})
                conn.commit()


def revisions(engine: Engine) -> tuple[str | None, str | None]:
    """(the database's Alembic revision or None when it has none, the code's head revision)."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    return current, ScriptDirectory.from_config(alembic_config()).get_current_head()


def downgrade(engine: Engine, revision: str) -> None:
    cfg = alembic_config()
    with _ALEMBIC_LOCK, _writer(engine) as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)
        conn.commit()


def check(engine: Engine) -> None:
    """Raise if the tables in code differ from what the migrations make."""
    cfg = alembic_config()
    with _ALEMBIC_LOCK, _writer(engine) as conn:
        cfg.attributes["connection"] = conn
        command.check(cfg)
