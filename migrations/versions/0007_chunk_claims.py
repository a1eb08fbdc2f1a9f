"""chunk_claims: a chunk a push is about to write, so concurrent pushes store it once

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24 22:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "chunk_claims",
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("lease_id", sa.String(length=36), nullable=False),
        sa.Column("wanted", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.ForeignKeyConstraint(
            ["lease_id"],
            ["upload_leases.id"],
            name=op.f("fk_chunk_claims_lease_id_upload_leases"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("hash", name=op.f("pk_chunk_claims")),
    )
    with op.batch_alter_table("chunk_claims", schema=None) as batch_op:
        batch_op.create_index("ix_chunk_claims_lease_id", ["lease_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("chunk_claims", schema=None) as batch_op:
        batch_op.drop_index("ix_chunk_claims_lease_id")
    op.drop_table("chunk_claims")
