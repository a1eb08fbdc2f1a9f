"""damaged_chunks: stored chunk copies found corrupt or missing, until a push heals them

Revision ID: 0006
Revises: 0009 (main's head when merged; was 0005)
Create Date: 2026-11-24 22:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0006"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "damaged_chunks",
        sa.Column("pack_id", sa.Integer(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.String(length=16), nullable=False),
        sa.Column("found_by", sa.String(length=16), nullable=False),
        sa.Column("found_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("length(hash) = 64", name=op.f("ck_damaged_chunks_hash_length")),
        sa.ForeignKeyConstraint(
            ["pack_id"],
            ["packs.id"],
            name=op.f("fk_damaged_chunks_pack_id_packs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pack_id", "idx", name=op.f("pk_damaged_chunks")),
    )
    with op.batch_alter_table("damaged_chunks", schema=None) as batch_op:
        batch_op.create_index("ix_damaged_chunks_hash", ["hash"], unique=False)
    if op.get_bind().dialect.name == "postgresql":
        op.create_check_constraint(
            op.f("ck_damaged_chunks_hash_hex"), "damaged_chunks", "hash ~ '^[0-9a-f]{64}$'"
        )


def downgrade() -> None:
    with op.batch_alter_table("damaged_chunks", schema=None) as batch_op:
        batch_op.drop_index("ix_damaged_chunks_hash")
    op.drop_table("damaged_chunks")
