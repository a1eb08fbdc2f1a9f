"""How every process learns, without a query per request, that cached read facts are gone.

The read path answers HEAD and GET of blobs and cartons from facts it keeps in memory
(``registry.services.caches.ReadFacts``). Those facts are immutable except that a verb
may remove them: deleting a version or model (its carton's URLs must 404), garbage
collection (its blobs), fsck finding a blob damaged. Each such verb bumps
``index_generation.value`` in its own transaction (``bump_generation``), and after it
commits it waits ``GENERATION_TRUST_SECONDS`` before returning (``wait_for_readers``).

A process trusts the generation it read for ``GENERATION_TRUST_SECONDS`` counted from
*before* it sent the query (``ReadFacts.adopt``). So by the time a removing verb
returns, every process, on this host or another, has stopped trusting any value read
before the commit: a request sent after the verb answered re-reads the generation,
sees the new value and drops its facts. The hot path costs a clock read; the database
is asked at most once per trust period per process, and only when requests come.

A new kind of removal (e.g. packs rewritten by a chunk-store GC) calls the same two
functions. Additions (pushes) need neither: nothing absent is ever cached.
"""

from __future__ import annotations

import time

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from registry.db.tables import IndexGeneration
from registry.services.context import RegistryContext

# Works on Postgres and SQLite (3.24+); recreates the row if a test truncated the table.
_BUMP = text(
    "INSERT INTO index_generation (id, value) VALUES (1, 1) "
    "ON CONFLICT (id) DO UPDATE SET value = index_generation.value + 1"
)


def bump_generation(session: Session) -> None:
    """Make every process drop its read facts once this transaction commits."""
    session.execute(_BUMP)


def wait_for_readers(ctx: RegistryContext) -> None:
    """After a bump committed: wait until no process still trusts an older generation."""
    time.sleep(ctx.caches.facts.trust_seconds)


def current_generation(ctx: RegistryContext) -> int:
    """The shared generation, read again once its trust has run out (may query)."""
    facts = ctx.caches.facts
    generation = facts.current()
    if generation is not None:
        return generation
    with facts.refresh_lock:
        generation = facts.current()
        if generation is not None:
            return generation  # another thread read it while this one waited
        read_at = time.monotonic()
        with ctx.engine.connect() as conn:
            value = conn.execute(select(IndexGeneration.value)).scalar()
            conn.rollback()
        generation = int(value or 0)
        facts.adopt(generation, read_at)
        return generation
