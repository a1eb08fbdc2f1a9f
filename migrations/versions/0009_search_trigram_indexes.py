"""search: trigram indexes for LIKE '%…%' on Postgres (pg_trgm), when it can be had

Free-text search and field terms are ``LIKE '%…%'`` (``registry.services.search``),
which scans every model without an index that knows substrings: 52–105 ms at 100k
models (BENCHMARKS.md figure 7). A GIN ``gin_trgm_ops`` index answers them from the
index for any term of three characters or more. ``pg_trgm`` ships with Postgres and is a
trusted extension (a database owner may create it); where it cannot be created the
migration says so and goes on: search stays correct, only slower. SQLite: nothing.
The indexes are not in ``tables.py`` (they exist on one dialect only); the schema
check skips indexes named ``*_trgm`` (migrations/env.py).

Revision ID: 0009
Revises: 0005
Create Date: 2026-11-24 22:50:00.000000
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

log = logging.getLogger("alembic.runtime.migration")

INDEXES = (
    ("ix_models_search_text_trgm", "models", "search_text"),
    ("ix_model_search_tokens_tokens_trgm", "model_search_tokens", "tokens"),
)


def _create_sql(name: str, table: str, column: str) -> str:
    return f"CREATE INDEX {name} ON {table} USING gin ({column} gin_trgm_ops);"


def _have_pg_trgm(conn: sa.Connection) -> bool:
    try:
        with conn.begin_nested():
            conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
    except sa.exc.DBAPIError as exc:
        log.warning(
            "pg_trgm is not available (%s): search works without its indexes but scans "
            "every model; as a superuser: CREATE EXTENSION pg_trgm; %s",
            str(exc).splitlines()[0],
            " ".join(_create_sql(*index) for index in INDEXES),
        )
        return False
    return True


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql" or not _have_pg_trgm(conn):
        return
    for index in INDEXES:
        op.execute(sa.text(_create_sql(*index)))


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name, table, _ in INDEXES:
        op.execute(sa.text(f"DROP INDEX IF EXISTS {name}"))
    # The extension stays: other schemas in the database may use it.
