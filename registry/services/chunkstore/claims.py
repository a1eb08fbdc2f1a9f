"""Chunk claims: which of several concurrent pushes writes a chunk the index lacks.

One ``chunk_claims`` row per chunk being written, its primary key the chunk's
hash, so exactly one push wins each claim (docs/chunk-store.md, "Each chunk
once"). A claim ends when its chunk's row is published (``drop_in``, in that
transaction), when its push fails (``drop_all``), or with its lease (foreign
key, on delete cascade); a claim whose lease went stale gives way
(``claim_in(..., take_over=True)``).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, String, bindparam, delete, exists, false, select, true, update
from sqlalchemy.sql.dml import ReturningInsert

from registry.db.queries import dialect_insert, in_list, list_values
from registry.db.tables import ChunkClaim, UploadLease
from registry.services.context import RegistryContext
from registry.services.leases import Lease

_DROP = delete(ChunkClaim.__table__).where(
    in_list(ChunkClaim.hash, "hashes"),
    # Compared as an expression, not a column: SQLite would otherwise walk every claim of
    # the lease through its index for each statement, not look up each hash by its key.
    ChunkClaim.lease_id + "" == bindparam("lease_id"),
)
"""One statement per pack published or batch given up, whatever its number of chunks
(``in_list``: the hashes are one parameter)."""

_STALE = delete(ChunkClaim.__table__).where(
    in_list(ChunkClaim.hash, "hashes"),
    ChunkClaim.lease_id.in_(
        select(UploadLease.id).where(UploadLease.heartbeat_at < bindparam("cutoff"))
    ),
)
"""The claims on ``hashes`` whose holder's lease went stale (a crashed push)."""

_WANT = (
    update(ChunkClaim.__table__)
    .where(
        ChunkClaim.hash.in_(
            select(ChunkClaim.hash)
            .where(in_list(ChunkClaim.hash, "hashes"), ChunkClaim.wanted.is_(False))
            .with_for_update(skip_locked=True)
        )
    )
    .values(wanted=True)
)
"""Mark the free claims on ``hashes`` wanted (``ChunkClaims.want``)."""


def _claim_statement(dialect: str) -> ReturningInsert[Any]:
    """INSERT of a claim per hash of the parameter ``hashes`` that no push holds,
    returning those it inserted: one statement a batch, bound with two values."""
    rows = select(list_values("hashes", dialect), bindparam("lease_id", type_=String()), false())
    # WHERE: SQLite reads "SELECT ... FROM f(...) ON CONFLICT" as a join constraint without it.
    statement: ReturningInsert[Any] = (
        dialect_insert(dialect, ChunkClaim.__table__)
        .from_select(["hash", "lease_id", "wanted"], rows.where(true()))
        .on_conflict_do_nothing()
        .returning(ChunkClaim.__table__.c.hash)
    )
    return statement


_CLAIM = {dialect: _claim_statement(dialect) for dialect in ("sqlite", "postgresql")}


def drop_in(connection: Connection, lease_id: str, hashes: Collection[str]) -> None:
    """End ``lease_id``'s claims on ``hashes`` in the caller's transaction."""
    if hashes:
        # In key order, as the claims were taken: concurrent pushes lock them in one order.
        connection.execute(_DROP, {"hashes": sorted(hashes), "lease_id": lease_id})


class ChunkClaims:
    """One push's claims (its lease holds them)."""

    def __init__(self, ctx: RegistryContext, lease: Lease) -> None:
        self.ctx = ctx
        self.lease = lease

    def claim_in(
        self, connection: Connection, hashes: Collection[str], *, take_over: bool
    ) -> set[str]:
        """The chunks among ``hashes`` this push now holds the claim of, in the caller's
        transaction (which may go on to look at the index).

        ``take_over``: claims whose holder's lease went stale (a crashed push) give way.
        """
        if not hashes:
            return set()
        # In key order: pushes racing for the same chunks lock their keys in one order.
        values = {"hashes": sorted(hashes), "lease_id": self.lease.id}
        if take_over:
            cutoff = datetime.now(UTC) - timedelta(seconds=self.ctx.settings.lease_timeout)
            connection.execute(_STALE, {"hashes": values["hashes"], "cutoff": cutoff})
        return set(connection.execute(_CLAIM[connection.dialect.name], values).scalars())

    def drop(self, hashes: Collection[str]) -> None:
        with self.ctx.core_transaction() as connection:
            drop_in(connection, self.lease.id, hashes)

    def drop_all(self) -> None:
        with self.ctx.transaction() as session:
            session.execute(delete(ChunkClaim).where(ChunkClaim.lease_id == self.lease.id))

    def want(self, hashes: Collection[str]) -> None:
        """Tell the holders of these claims that a push waits for them.

        A hint, so it never waits for a row lock (``SKIP LOCKED`` on Postgres): a claim
        locked now is being published or taken, and the caller asks again if not.
        """
        if hashes:
            with self.ctx.core_transaction() as connection:
                connection.execute(_WANT, {"hashes": sorted(hashes)})

    def any_wanted(self) -> bool:
        """Whether another push waits for a chunk this push claimed."""
        with self.ctx.engine.connect() as connection:
            return self.any_wanted_in(connection)

    def any_wanted_in(self, connection: Connection) -> bool:
        return bool(
            connection.scalar(
                select(exists().where(ChunkClaim.lease_id == self.lease.id, ChunkClaim.wanted))
            )
        )
