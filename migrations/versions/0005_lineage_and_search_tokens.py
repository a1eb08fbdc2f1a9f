"""lineage: carton_lineage; search: model_search_tokens, what is inside each model

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 10:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import sqlalchemy as sa
from alembic import op


revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "carton_lineage",
        sa.Column("manifest_sha256", sa.String(length=64), nullable=False),
        sa.Column("parent_sha256", sa.String(length=64), nullable=True),
        sa.Column("bytes_shared", sa.BigInteger(), nullable=False),
        sa.Column("bytes_total", sa.BigInteger(), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "bytes_shared >= 0", name=op.f("ck_carton_lineage_bytes_shared_nonnegative")
        ),
        sa.CheckConstraint(
            "bytes_total >= 0", name=op.f("ck_carton_lineage_bytes_total_nonnegative")
        ),
        sa.CheckConstraint(
            "parent_sha256 <> manifest_sha256", name=op.f("ck_carton_lineage_not_own_parent")
        ),
        sa.ForeignKeyConstraint(
            ["manifest_sha256"],
            ["cartons.manifest_sha256"],
            name=op.f("fk_carton_lineage_manifest_sha256_cartons"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["parent_sha256"],
            ["cartons.manifest_sha256"],
            name=op.f("fk_carton_lineage_parent_sha256_cartons"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("manifest_sha256", name=op.f("pk_carton_lineage")),
    )
    with op.batch_alter_table("carton_lineage", schema=None) as batch_op:
        batch_op.create_index("ix_carton_lineage_parent_sha256", ["parent_sha256"], unique=False)
    op.create_table(
        "model_search_tokens",
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["models.id"],
            name=op.f("fk_model_search_tokens_model_id_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("model_id", name=op.f("pk_model_search_tokens")),
    )
    _fill_search_tokens()


def _fill_search_tokens() -> None:
    """The tokens of every model's latest version.

    They are a cache of the cartons' rows, so the code of the release running the
    migration computes them (``registry.services.search.search_tokens``). Lineage is
    not backfilled here: a carton without a lineage row gets one when it is first read.
    """
    from registry.services.search import search_tokens

    bind = op.get_bind()
    rows = bind.execute(
        sa.text(
            "SELECT m.id, m.name, c.short_description, c.description, c.runner_name, "
            "c.framework_version, c.carton_toml FROM models m "
            "JOIN versions v ON v.model_id = m.id AND v.version = m.latest_version "
            "JOIN cartons c ON c.manifest_sha256 = v.manifest_sha256"
        )
    ).all()
    insert = sa.text("INSERT INTO model_search_tokens (model_id, tokens) VALUES (:id, :tokens)")
    for row in rows:
        carton = SimpleNamespace(
            runner_name=row.runner_name,
            framework_version=row.framework_version,
            carton_toml=row.carton_toml,
        )
        bind.execute(insert, {"id": row.id, "tokens": search_tokens(carton)})  # type: ignore[arg-type]


def downgrade() -> None:
    op.drop_table("model_search_tokens")
    with op.batch_alter_table("carton_lineage", schema=None) as batch_op:
        batch_op.drop_index("ix_carton_lineage_parent_sha256")
    op.drop_table("carton_lineage")
