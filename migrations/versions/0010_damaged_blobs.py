"""damaged_blobs: whole blobs whose stored bytes were found corrupt, until a write heals them

Revision ID: 0010
Revises: 0008
Create Date: 2026-11-25 01:40:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0010"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "damaged_blobs",
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.String(length=16), nullable=False),
        sa.Column("found_by", sa.String(length=16), nullable=False),
        sa.Column("found_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("length(sha256) = 64", name=op.f("ck_damaged_blobs_sha256_length")),
        sa.PrimaryKeyConstraint("sha256", name=op.f("pk_damaged_blobs")),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.create_check_constraint(
            op.f("ck_damaged_blobs_sha256_hex"), "damaged_blobs", "sha256 ~ '^[0-9a-f]{64}$'"
        )


def downgrade() -> None:
    op.drop_table("damaged_blobs")
