"""The chunk store's hot statements, as SQLite plans them: a push runs them for every
batch of about 200 chunks, so a plan that walks a whole index instead makes each one
cost as much as the claims outstanding (Postgres has statistics to choose by)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import event

from registry.services import chunk_transfer
from registry.services.chunkstore.claims import ChunkClaims, drop_in
from registry.services.chunkstore.writer import _indexed
from registry.services.context import RegistryContext
from registry.services.leases import Lease
from registry.settings import Settings


@pytest.fixture
def sqlite_ctx(tmp_path) -> Iterator[RegistryContext]:
    ctx = RegistryContext.open(
        Settings(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'registry.db'}"),
        migrate=True,
    )
    try:
        yield ctx
    finally:
        ctx.close()


def plan_of(ctx: RegistryContext, run, prefix: str) -> str:
    """SQLite's plan for the first statement starting with ``prefix`` that ``run`` sends."""
    sent: list[tuple[str, object]] = []

    def capture(_conn, _cursor, statement, parameters, _context, _many) -> None:
        if statement.startswith(prefix):
            sent.append((statement, parameters))

    event.listen(ctx.engine, "before_cursor_execute", capture)
    try:
        run()
    finally:
        event.remove(ctx.engine, "before_cursor_execute", capture)
    assert sent, f"no statement starting with {prefix!r} was sent"
    statement, parameters = sent[0]
    with ctx.engine.connect() as connection:
        rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
        return " | ".join(str(row[-1]) for row in rows)


def test_claims_are_dropped_by_their_key_not_by_walking_the_lease(sqlite_ctx):
    def drop() -> None:
        with sqlite_ctx.core_transaction() as connection:
            drop_in(connection, "a-lease", [f"{i:064x}" for i in range(300)])  # a batch

    plan = plan_of(sqlite_ctx, drop, "DELETE FROM chunk_claims")
    assert "ix_chunk_claims_lease_id" not in plan, plan
    assert "(hash=?)" in plan, plan


def test_a_batch_is_looked_up_by_key_from_one_list_parameter(sqlite_ctx):
    hashes = {f"{i:064x}" for i in range(300)}

    def look_up() -> None:
        with sqlite_ctx.engine.connect() as connection:
            _indexed(connection, hashes)

    plan = plan_of(sqlite_ctx, look_up, "SELECT chunks.hash")
    assert "SEARCH chunks USING INDEX sqlite_autoindex_chunks_1 (hash=?)" in plan, plan
    assert "json_each" in plan, plan


def test_stale_claims_are_found_by_their_key(sqlite_ctx):
    with Lease(sqlite_ctx.sessions, 30) as lease:
        claims = ChunkClaims(sqlite_ctx, lease)

        def take_over() -> None:
            with sqlite_ctx.core_transaction() as connection:
                claims.claim_in(connection, [f"{i:064x}" for i in range(300)], take_over=True)

        plan = plan_of(sqlite_ctx, take_over, "DELETE FROM chunk_claims")
    assert "(hash=?)" in plan, plan
    assert "SCAN chunk_claims" not in plan, plan


def test_a_missing_chunks_query_looks_up_by_key_from_one_list_parameter(sqlite_ctx):
    names = [f"{i:064x}" for i in range(1000)]  # more than one IN_CHUNK slice once were

    def ask() -> None:
        assert chunk_transfer.missing_chunks(sqlite_ctx, names) == names

    plan = plan_of(sqlite_ctx, ask, "SELECT chunks.hash")
    assert "SEARCH chunks USING INDEX sqlite_autoindex_chunks_1 (hash=?)" in plan, plan
    assert "json_each" in plan, plan
