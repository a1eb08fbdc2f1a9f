"""Damaged whole blobs: small files stored whole whose object is known to be unreadable.

A whole blob (``wholeblobs``: a file of at most ``REGISTRY_CHUNK_MIN_FILE_BYTES``,
or any file pushed before the chunk store) is one store object named by its
sha256. When a verified read or fsck finds that object's bytes do not hash to
its name (``corrupt``) or have another size than its row (``wrong_size``), it is
recorded in ``damaged_blobs``. From then on:

- negotiation (``blobs/missing``, a push's known files) answers "missing" for it,
  so a client sends the bytes again;
- a write of those bytes (``WholeBlobs.flush``) *replaces* the stored object
  (``BlobStore.put(..., replace=True)``) rather than keeping it, as a put
  otherwise does;
- the record is deleted in the transaction that indexes the healed file
  (``PackSession.pack_ids``), and fsck with ``verify_hashes`` drops records of
  objects that hash right again (restored from a backup).

The damage a chunked file can have is ``damage`` (by chunk copy, in packs).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from sqlalchemy import Executable, delete, select
from sqlalchemy.orm import Session

from registry.db.queries import in_chunks, insert_ignore_returning
from registry.db.tables import DamagedBlob
from registry.services.context import RegistryContext
from registry.services.freshness import bump_generation
from registry.services.observers import notify

log = logging.getLogger("registry.chunkstore")

CORRUPT = "corrupt"
WRONG_SIZE = "wrong_size"


def record_blob_damage(
    ctx: RegistryContext, hashes: Iterable[str], reason: str, found_by: str
) -> set[str]:
    """Record the whole blobs ``hashes`` as damaged; the ones newly recorded.

    Bumps the index generation so no process keeps serving them from memory, logs, and
    counts them (``registry_damaged_blobs_total``).
    """
    wanted = sorted(set(hashes))
    if not wanted:
        return set()
    rows = [{"sha256": sha, "reason": reason, "found_by": found_by} for sha in wanted]
    with ctx.transaction() as session:
        new = insert_ignore_returning(
            session, DamagedBlob.__table__, rows, DamagedBlob.__table__.c.sha256
        )
        if new:
            bump_generation(session)
    if new:
        log.error(
            "blob store damage: %d whole blob(s) %s (found by %s): %s; a push of the same "
            "bytes replaces them",
            len(new),
            reason,
            found_by,
            ", ".join(sorted(new)[:5]),
        )
        ctx.caches.facts.distrust()
        notify(ctx.observers.damaged_blobs, reason, found_by, len(new))
    ctx.caches.index_changed()
    return set(new)


def any_blob_damage(session: Session) -> bool:
    """Whether any whole blob is recorded as damaged (one indexed probe)."""
    return session.scalar(select(DamagedBlob.sha256).limit(1)) is not None


def _each_batch(
    session: Session, hashes: Iterable[str], statement: Callable[[Sequence[str]], Executable]
) -> set[str]:
    """The hashes ``statement(batch)`` returns over ``hashes`` a thousand at a time; nothing
    (and no query beyond one probe) when no whole blob is recorded."""
    wanted = sorted(set(hashes))
    if not wanted or not any_blob_damage(session):
        return set()
    found: set[str] = set()
    for batch in in_chunks(wanted):
        found.update(session.scalars(statement(batch)))
    return found


def damaged_blobs(session: Session, hashes: Iterable[str]) -> set[str]:
    """Those of ``hashes`` recorded as damaged whole blobs."""
    return _each_batch(
        session,
        hashes,
        lambda batch: select(DamagedBlob.sha256).where(DamagedBlob.sha256.in_(batch)),
    )


def forget_blob_damage(session: Session, hashes: Iterable[str]) -> set[str]:
    """Delete the records of ``hashes`` (healed, or found good again) in the caller's
    transaction; the ones that were recorded."""
    found = _each_batch(
        session,
        hashes,
        lambda batch: (
            delete(DamagedBlob).where(DamagedBlob.sha256.in_(batch)).returning(DamagedBlob.sha256)
        ),
    )
    if found:
        bump_generation(session)
    return found
