"""index generation: the number readers watch to drop cached facts

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 13:40:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    table = op.create_table(
        "index_generation",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_index_generation_single_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_index_generation")),
    )
    op.bulk_insert(table, [{"id": 1, "value": 0}])


def downgrade() -> None:
    op.drop_table("index_generation")
