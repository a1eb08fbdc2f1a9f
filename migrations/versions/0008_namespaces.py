"""namespaces: namespaces, models.namespace, api_tokens.namespaces, blob_uploads

Existing models, cartons and tokens stay where they were: every model name so far has
no ``/``, so each lands in the root namespace (``models.namespace`` = ""), and every
token stays global (``api_tokens.namespaces`` = "").

Revision ID: 0008
Revises: 0007 (main chained 0005 -> 0009 -> 0006 -> 0007 first; re-chained after its head)
Create Date: 2026-11-24 22:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "namespaces",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("visibility", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "visibility IN ('public', 'private')", name=op.f("ck_namespaces_visibility_known")
        ),
        sa.CheckConstraint(
            "length(name) >= 1 AND length(name) <= 64", name=op.f("ck_namespaces_name_length")
        ),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_namespaces")),
    )
    op.create_table(
        "blob_uploads",
        sa.Column("token_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("uploaded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("token_id", "sha256", name=op.f("pk_blob_uploads")),
    )
    with op.batch_alter_table("blob_uploads", schema=None) as batch_op:
        batch_op.create_index("ix_blob_uploads_uploaded_at", ["uploaded_at"], unique=False)
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("namespace", sa.String(length=64), server_default="", nullable=False)
        )
        batch_op.create_index(batch_op.f("ix_models_namespace"), ["namespace"], unique=False)
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("namespaces", sa.Text(), server_default="", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_column("namespaces")
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_models_namespace"))
        batch_op.drop_column("namespace")
    with op.batch_alter_table("blob_uploads", schema=None) as batch_op:
        batch_op.drop_index("ix_blob_uploads_uploaded_at")
    op.drop_table("blob_uploads")
    op.drop_table("namespaces")
