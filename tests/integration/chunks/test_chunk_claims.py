"""Chunk claims, one race at a time on both backend pairs: a push that loses a claim
uses the winner's copy once it is published, and writes the chunk itself when the
winner failed or its lease went stale (docs/chunk-store.md, "Each chunk once")."""

from __future__ import annotations

import concurrent.futures
import random
import time
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import event, select

from registry.chunking import chunk_hash
from registry.db.tables import Chunk, ChunkClaim
from registry.services.chunkstore.claims import ChunkClaims, drop_in
from registry.services.chunkstore.layout import ChunkRef
from registry.services.chunkstore.writer import PackSession
from registry.services.context import RegistryContext
from registry.services.leases import Lease

DATA = random.Random(5).randbytes(100_000)
NAME = chunk_hash(DATA)


def until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` (bounded: the test fails rather than hangs)."""
    for _ in range(2000):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


def claim_wanted(ctx: RegistryContext) -> bool:
    with ctx.sessions() as s:
        return bool(s.scalar(select(ChunkClaim.wanted).where(ChunkClaim.hash == NAME)))


class Push:
    """A push's lease and pack session, for driving a race by hand."""

    def __init__(self, ctx: RegistryContext, lease_timeout: float | None = None) -> None:
        timeout = ctx.settings.lease_timeout if lease_timeout is None else lease_timeout
        self.lease = Lease(ctx.sessions, timeout)
        self.packs = PackSession(ctx, self.lease)

    def close(self) -> None:
        self.lease.stop_heartbeat()
        self.lease.release()


@pytest.fixture
def pushes(registry_ctx) -> Iterator[Callable[..., Push]]:
    made: list[Push] = []

    def make(lease_timeout: float | None = None) -> Push:
        made.append(Push(registry_ctx, lease_timeout))
        return made[-1]

    yield make
    for push in made:
        push.close()


def place_in_background(push: Push) -> concurrent.futures.Future[list[ChunkRef]]:
    pool = concurrent.futures.ThreadPoolExecutor(1)
    future = pool.submit(push.packs.place, [(NAME, DATA)])
    pool.shutdown(wait=False)
    return future


def test_a_lost_claim_waits_for_the_winners_copy(registry_ctx, pushes):
    winner, loser = pushes(), pushes()
    (mine,) = winner.packs.place([(NAME, DATA)])  # claimed, in the winner's open pack
    waiting = place_in_background(loser)
    until(lambda: claim_wanted(registry_ctx), "the loser marks the claim wanted")
    assert not waiting.done()
    winner.packs.finish()  # seals and publishes: the claim ends
    (theirs,) = waiting.result(timeout=60)
    assert theirs == mine and loser.packs.chunks_written == 0
    assert loser.packs.duplicate_chunks == 0
    with registry_ctx.sessions() as s:
        assert s.scalars(select(ChunkClaim.hash)).all() == []
        assert s.scalar(select(Chunk.idx).where(Chunk.hash == NAME)) == mine.idx
    assert len(list(registry_ctx.blobs.iter_packs())) == 1


def test_a_wanted_claim_makes_its_holder_seal_at_its_next_batch(registry_ctx, pushes):
    winner, loser = pushes(), pushes()
    (mine,) = winner.packs.place([(NAME, DATA)])
    waiting = place_in_background(loser)
    until(lambda: claim_wanted(registry_ctx), "the loser marks the claim wanted")
    other = random.Random(6).randbytes(50_000)
    winner.packs.place([(chunk_hash(other), other)])  # its next batch: the pack is sealed
    (theirs,) = waiting.result(timeout=60)
    assert theirs == mine and loser.packs.chunks_written == 0
    winner.packs.finish()


def test_a_failed_holders_claim_is_taken_and_written(registry_ctx, pushes):
    winner, loser = pushes(), pushes()
    winner.packs.place([(NAME, DATA)])
    waiting = place_in_background(loser)
    until(lambda: claim_wanted(registry_ctx), "the loser marks the claim wanted")
    winner.packs.discard()  # a rejected push: its open pack aborted, its claims dropped
    (ref,) = waiting.result(timeout=60)
    assert loser.packs.chunks_written == 1 and loser.packs.duplicate_chunks == 0
    loser.packs.finish()
    with registry_ctx.sessions() as s:
        assert s.scalar(select(Chunk.offset).where(Chunk.hash == NAME)) == ref.offset
    assert [p.name for p in registry_ctx.blobs.iter_packs()] == [ref.pack]


@pytest.mark.settings(lease_timeout=1)
def test_a_stale_holders_claim_is_taken_over(registry_ctx, pushes):
    # The loser's own lease must not go stale on a busy machine (a 1 s lease beats every
    # 0.5 s, which a loaded CI runner can miss); claims are judged by the 1 s setting.
    crashed, loser = pushes(), pushes(lease_timeout=60)
    crashed.packs.place([(NAME, DATA)])
    crashed.lease.stop_heartbeat()  # its server died mid-push

    def stale() -> bool:
        with registry_ctx.sessions() as s:
            return not crashed.lease.is_alive(s)

    until(stale, "the crashed push's lease goes stale")
    (ref,) = loser.packs.place([(NAME, DATA)])
    assert loser.packs.chunks_written == 1 and loser.packs.duplicate_chunks == 0
    loser.packs.finish()
    with registry_ctx.sessions() as s:
        assert s.scalar(select(ChunkClaim.lease_id).where(ChunkClaim.hash == NAME)) is None
        assert s.scalar(select(Chunk.offset).where(Chunk.hash == NAME)) == ref.offset
    crashed.packs.discard()  # what a crashed push leaves, GC's orphan pass takes


def test_a_chunk_published_between_the_lookup_and_the_claim_is_used_not_written(
    registry_ctx, pushes
):
    """B looks the chunk up (absent), A publishes it, then B claims it: B's claim and its
    look at the index share one transaction, so B uses A's copy, writes nothing and
    keeps no claim."""
    a, b = pushes(), pushes()
    real_lookup = b.packs.lookup

    def lookup_then_a_publishes(hashes: set[str]) -> dict[str, ChunkRef]:
        found = real_lookup(hashes)
        a.packs.place([(NAME, DATA)])
        a.packs.finish()
        return found

    b.packs.lookup = lookup_then_a_publishes  # type: ignore[method-assign]
    [ref] = b.packs.place([(NAME, DATA)])
    b.packs.finish()
    assert ref.pack in a.packs._packs.opened
    assert b.packs.chunks_written == 0
    with registry_ctx.sessions() as s:
        assert s.scalars(select(ChunkClaim).where(ChunkClaim.lease_id == b.lease.id)).all() == []
        assert len(s.scalars(select(Chunk).where(Chunk.hash == NAME)).all()) == 1


def test_a_batch_of_more_hashes_than_an_in_list_held_is_claimed_in_one_statement(
    registry_ctx, pushes
):
    """The hashes of a batch are one parameter (a JSON array on SQLite, an array on
    Postgres), so any number of them is claimed, looked up and dropped in one statement
    each; a claim held by one push is not won by another."""
    a, b = pushes(), pushes()
    hashes = [f"{i:064x}" for i in range(1_200)]  # more than IN_CHUNK, and SQLite's 999
    sent: list[str] = []

    def count(_conn, _cursor, statement, _params, _context, _many) -> None:
        sent.append(statement.split(None, 3)[2] if statement.startswith("INSERT") else "")

    event.listen(registry_ctx.engine, "before_cursor_execute", count)
    try:
        with registry_ctx.core_transaction() as connection:
            won = ChunkClaims(registry_ctx, a.lease).claim_in(connection, hashes, take_over=False)
    finally:
        event.remove(registry_ctx.engine, "before_cursor_execute", count)
    assert won == set(hashes)
    assert sent.count("chunk_claims") == 1
    with registry_ctx.core_transaction() as connection:
        taken = ChunkClaims(registry_ctx, b.lease).claim_in(connection, hashes, take_over=True)
    assert taken == set()
    assert b.packs.lookup(set(hashes)) == {}
    with registry_ctx.core_transaction() as connection:
        drop_in(connection, a.lease.id, hashes[:700])
    with registry_ctx.sessions() as s:
        held = set(s.scalars(select(ChunkClaim.hash).where(ChunkClaim.lease_id == a.lease.id)))
    assert held == set(hashes[700:])
