"""Dedup that tells nobody about data they cannot read (DESIGN.md "Namespaces").

Storage dedup stays global: bytes are stored once whoever pushes them. The
negotiation is not: ``blobs/missing``, ``chunks/missing``, assembly and the push
itself treat a file or chunk as present for a caller only when it can already read
it (a carton it may pull holds it), or when the same token uploaded it within the GC
grace period (``blob_uploads``). Anything else is "missing": the client uploads it,
the registry verifies it and keeps the one copy it had. What a caller is told it
added (``created``, ``bytes_new``, ``stored``) counts such data as new to it.

All of this applies only to a caller that cannot read some private namespace;
otherwise there is nothing to hide and the answers are the store's own.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from registry.db.queries import in_chunks, insert_ignore
from registry.db.tables import BlobSegment, BlobUpload, Carton, CartonFile, Chunk, utcnow
from registry.services.access import (
    carton_readable,
    current_access,
    hidden_namespaces,
    known_private_namespaces,
    readable_blobs,
    readable_carton_condition,
)
from registry.services.chunkstore.index import segment_holds_chunk
from registry.services.context import RegistryContext


def restricted(session: Session) -> bool:
    """The caller cannot read some private namespace: its negotiation is filtered."""
    return bool(hidden_namespaces(session))


def usable_blobs(ctx: RegistryContext, session: Session, hashes: Iterable[str]) -> set[str]:
    """Of ``hashes``, those the caller may treat as present (module docstring)."""
    wanted = list(dict.fromkeys(hashes))
    return readable_blobs(session, wanted, uploads_within=ctx.settings.gc_grace)


def usable_chunks(ctx: RegistryContext, session: Session, names: Iterable[str]) -> set[str]:
    """Of chunk ``names``, those in a file the caller may read, or uploaded by its token
    within the grace period; all of them when it may read everything."""
    wanted = sorted(set(names))
    hidden = hidden_namespaces(session)
    if not hidden:
        return set(wanted)
    access = current_access()
    since = utcnow().timestamp() - ctx.settings.gc_grace
    found: set[str] = set()
    for batch in in_chunks(wanted):
        found |= set(
            session.scalars(
                select(Chunk.hash)
                .join(BlobSegment, segment_holds_chunk())
                .join(CartonFile, CartonFile.blob_sha256 == BlobSegment.blob_sha256)
                .where(Chunk.hash.in_(batch), readable_carton_condition(hidden))
                .distinct()
            )
        )
        found |= {
            row.sha256
            for row in session.execute(
                select(BlobUpload.sha256, BlobUpload.uploaded_at).where(
                    BlobUpload.token_id == access.upload_key, BlobUpload.sha256.in_(batch)
                )
            )
            if row.uploaded_at.timestamp() >= since
        }
    return found


def carton_stored_for_others(session: Session, manifest_sha256: str) -> bool:
    """The carton is stored, but the caller may not read it (a push of it is new to it)."""
    if session.get(Carton, manifest_sha256) is None:
        return False
    return not carton_readable(session, manifest_sha256, hidden_namespaces(session))


def record_uploads(ctx: RegistryContext, hashes: Iterable[str]) -> None:
    """Remember that the caller's token uploaded these files or chunks (verified)."""
    wanted = sorted(set(hashes))
    if not wanted or current_access().global_reader or known_private_namespaces(ctx) == frozenset():
        return  # nothing is hidden from this caller: nothing to remember (and no query)
    key = current_access().upload_key
    now = utcnow()
    with ctx.transaction() as session:
        if not restricted(session):
            return  # nothing is hidden from it: nothing to remember
        for batch in in_chunks(wanted):
            insert_ignore(
                session,
                BlobUpload.__table__,
                [{"token_id": key, "sha256": h, "uploaded_at": now} for h in batch],
            )
            session.execute(
                update(BlobUpload)
                .where(BlobUpload.token_id == key, BlobUpload.sha256.in_(batch))
                .values(uploaded_at=now)
            )
        # The token's records past the grace period say nothing any more.
        session.execute(
            delete(BlobUpload).where(
                BlobUpload.token_id == key,
                BlobUpload.uploaded_at < now - timedelta(seconds=ctx.settings.gc_grace),
            )
        )
