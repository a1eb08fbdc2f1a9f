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


def place_in_background(
    push: Push, batch: list[tuple[str, bytes]] | None = None
) -> concurrent.futures.Future[list[ChunkRef]]:
    pool = concurrent.futures.ThreadPoolExecutor(1)
    future = pool.submit(push.packs.place, batch or [(NAME, DATA)])
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


def chunk(seed: int) -> tuple[str, bytes]:
    data = random.Random(seed).randbytes(20_000)
    return chunk_hash(data), data


def first_words(registry_ctx: RegistryContext, place: Callable[[], object]) -> list[str]:
    """The chunk statements ``place`` sends: "claim" (INSERT INTO chunk_claims) and
    "look" (SELECT from chunks), in order."""
    sent: list[str] = []

    def note(_conn, _cursor, statement, _params, _context, _many) -> None:
        if statement.startswith("INSERT INTO chunk_claims"):
            sent.append("claim")
        elif statement.startswith("SELECT chunks.hash"):
            sent.append("look")

    event.listen(registry_ctx.engine, "before_cursor_execute", note)
    try:
        place()
    finally:
        event.remove(registry_ctx.engine, "before_cursor_execute", note)
    return sent


def test_after_an_all_new_batch_the_next_is_claimed_then_looked_up(registry_ctx, pushes):
    """A batch whose chunks were all new makes the next one claim first and look at the
    index in the same transaction (one lookup, not two); a chunk of it that the index
    has is used, not written, and its claim dropped; a batch that met the index goes
    back to looking up first."""
    a, b = pushes(), pushes()
    a.packs.place([(NAME, DATA)])
    a.packs.finish()  # NAME is in the index
    new1, new2, new3 = chunk(11), chunk(12), chunk(13)

    assert first_words(registry_ctx, lambda: b.packs.place([new1])) == ["look", "claim", "look"]
    refs: list[ChunkRef] = []
    words = first_words(registry_ctx, lambda: refs.extend(b.packs.place([(NAME, DATA), new2])))
    assert words == ["claim", "look"]
    assert refs[0].pack in a.packs._packs.opened  # the index's copy
    assert refs[1].pack in b.packs._packs.opened
    assert b.packs.chunks_written == 2  # new1, new2: not NAME
    with registry_ctx.sessions() as s:
        held = set(s.scalars(select(ChunkClaim.hash).where(ChunkClaim.lease_id == b.lease.id)))
    assert held == {new1[0], new2[0]}  # their packs are not published yet; NAME's claim ended
    # That batch met the index: the next one looks first again.
    assert first_words(registry_ctx, lambda: b.packs.place([new3]))[0] == "look"
    b.packs.finish()
    with registry_ctx.sessions() as s:
        assert len(s.scalars(select(Chunk).where(Chunk.hash == NAME)).all()) == 1
        assert s.scalars(select(ChunkClaim)).all() == []


def test_a_claim_first_batch_waits_for_a_chunk_another_push_holds(registry_ctx, pushes):
    """Claiming first, a chunk another push holds and has not published is neither won
    nor found: the push waits for the holder's copy, as a push looking first does."""
    winner, loser = pushes(), pushes()
    (mine,) = winner.packs.place([(NAME, DATA)])  # held, in the winner's open pack
    loser.packs.place([chunk(21)])  # all new: the loser's next batch claims first
    waiting = place_in_background(loser, [(NAME, DATA), chunk(22)])
    until(lambda: claim_wanted(registry_ctx), "the loser marks the claim wanted")
    winner.packs.finish()
    theirs, _ = waiting.result(timeout=60)
    assert theirs == mine
    assert loser.packs.chunks_written == 2  # chunks 21 and 22, not NAME
    loser.packs.finish()
    with registry_ctx.sessions() as s:
        assert len(s.scalars(select(Chunk).where(Chunk.hash == NAME)).all()) == 1
