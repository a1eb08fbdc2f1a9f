"""Damaged chunks: what the index knows is unreadable, and how a push heals it.

A stored copy of a chunk is *damaged* when its bytes do not hash to its name
(``corrupt``) or its pack is gone (``missing``). fsck, verified reads and the
scrub record such copies in ``damaged_chunks`` (by pack and index: the same
bytes may be stored twice). From then on:

- negotiation answers "missing" for them (a chunk whose indexed copy is
  damaged, a file with a segment over a damaged copy), and a push's chunk
  lookup ignores them, so the bytes a client sends are written again;
- ``heal`` (in the transaction that publishes a push's packs) moves every
  reference to a damaged copy onto a good one: the ``chunks`` row, and every
  file's segments over it (split around the healed chunk), then drops the
  record. The damaged bytes stay in their pack, referenced by nothing, until
  GC rewrites or deletes it.

So one re-push of any carton holding the bytes heals every file that shares
them (docs/chunk-store.md, "Damage and healing").
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from itertools import accumulate

from sqlalchemy import ColumnElement, and_, delete, exists, select, update
from sqlalchemy.orm import Session

from registry.db.queries import in_chunks, insert_ignore
from registry.db.tables import BlobSegment, Chunk, DamagedChunk, Pack
from registry.services.chunkstore.layout import ChunkRef, parse_pack_table, segments_of
from registry.services.chunkstore.wholedamage import damaged_blobs
from registry.services.context import RegistryContext
from registry.services.freshness import bump_generation
from registry.services.observers import notify

log = logging.getLogger("registry.chunkstore")

CORRUPT = "corrupt"
MISSING = "missing"


def record_damage(
    ctx: RegistryContext,
    pack: str,
    indices: Iterable[int] | None,
    reason: str,
    found_by: str,
) -> int:
    """Record chunks ``indices`` of ``pack`` (all of them when None) as damaged.

    Returns how many records are new; bumps the index generation so no process keeps
    serving the files' facts from memory. A pack with no live row (GC took or retired
    it) records nothing.
    """
    with ctx.transaction() as session:
        row = session.execute(
            select(Pack.id, Pack.chunk_table).where(Pack.name == pack, Pack.retired_at.is_(None))
        ).one_or_none()
        if row is None:
            return 0
        entries = parse_pack_table(bytes(row.chunk_table))
        wanted = range(len(entries)) if indices is None else sorted(set(indices))
        known = set(session.scalars(select(DamagedChunk.idx).where(DamagedChunk.pack_id == row.id)))
        rows = [
            {
                "pack_id": row.id,
                "idx": i,
                "hash": entries[i][0],
                "reason": reason,
                "found_by": found_by,
            }
            for i in wanted
            if 0 <= i < len(entries) and i not in known
        ]
        insert_ignore(session, DamagedChunk.__table__, rows)
        if rows:
            bump_generation(session)
    if rows:
        log.error(
            "chunk store damage: %d chunk(s) of pack %s %s (found by %s); a push of the "
            "same bytes heals them",
            len(rows),
            pack,
            reason,
            found_by,
        )
        notify(ctx.observers.damage, reason, found_by, len(rows))
    ctx.caches.index_changed()
    return len(rows)


def any_damage(session: Session) -> bool:
    """Whether any damage is recorded (the common answer, no, costs one indexed probe)."""
    return session.scalar(select(DamagedChunk.pack_id).limit(1)) is not None


def undamaged_copy() -> ColumnElement[bool]:
    """A WHERE clause for ``chunks`` rows whose copy is not recorded as damaged."""
    return ~exists().where(
        and_(DamagedChunk.pack_id == Chunk.pack_id, DamagedChunk.idx == Chunk.idx)
    )


def damaged_files(session: Session, hashes: Iterable[str]) -> set[str]:
    """Those of ``hashes`` (files) with a segment over a damaged chunk, or stored whole
    in an object recorded as damaged (``wholedamage``)."""
    wanted = sorted(set(hashes))
    if not wanted:
        return set()
    found = damaged_blobs(session, wanted)
    if not any_damage(session):
        return found
    for batch in in_chunks(wanted):
        found.update(
            session.scalars(
                select(BlobSegment.blob_sha256)
                .join(
                    DamagedChunk,
                    and_(
                        DamagedChunk.pack_id == BlobSegment.pack_id,
                        DamagedChunk.idx >= BlobSegment.first_chunk,
                        DamagedChunk.idx < BlobSegment.end_chunk,
                    ),
                )
                .where(BlobSegment.blob_sha256.in_(batch))
                .distinct()
            )
        )
    return found


def heal(
    session: Session, written: Mapping[str, ChunkRef], pack_ids: Mapping[str, int]
) -> dict[str, ChunkRef]:
    """Point every reference to a damaged copy at a good one; the chunks healed, each with
    the good copy now indexed.

    A good copy is the indexed copy when it is not damaged itself, or one this push
    ``written`` (hash -> where, in packs published in this transaction, ``pack_ids``:
    at least the copies whose index rows point elsewhere, as a damaged copy's does).
    Damage with no good copy anywhere stays recorded. Runs in the caller's transaction;
    the damaged rows are locked first, so two pushes never heal the same file at once.
    """
    if not any_damage(session):
        return {}
    damaged = {
        (int(r.pack_id), int(r.idx)): r.hash
        for r in session.execute(
            select(DamagedChunk.pack_id, DamagedChunk.idx, DamagedChunk.hash).with_for_update()
        )
    }
    if not damaged:
        return {}
    hashes = sorted(set(damaged.values()))
    indexed: dict[str, tuple[int, ChunkRef]] = {}
    for batch in in_chunks(hashes):
        for r in session.execute(
            select(Chunk.hash, Chunk.pack_id, Chunk.idx, Chunk.offset, Chunk.length, Pack.name)
            .join(Pack, Pack.id == Chunk.pack_id)
            .where(Chunk.hash.in_(batch), Pack.retired_at.is_(None))
        ):
            ref = ChunkRef(r.name, int(r.idx), int(r.offset), int(r.length))
            indexed[r.hash] = (int(r.pack_id), ref)
    good: dict[str, ChunkRef] = {}
    for digest in hashes:
        at = indexed.get(digest)
        if at is not None and (at[0], at[1].idx) not in damaged:
            good[digest] = at[1]
        elif digest in written and written[digest].pack in pack_ids:
            ref = written[digest]
            good[digest] = ref
            values = {
                "pack_id": pack_ids[ref.pack],
                "idx": ref.idx,
                "offset": ref.offset,
                "length": ref.length,
            }
            if at is None:
                insert_ignore(session, Chunk.__table__, [{"hash": digest, **values}])
            else:
                session.execute(update(Chunk).where(Chunk.hash == digest).values(**values))
    healed = {key: digest for key, digest in damaged.items() if digest in good}
    if not healed:
        return {}
    _repoint(session, healed, good)
    for pack_id, idx in healed:
        session.execute(
            delete(DamagedChunk).where(DamagedChunk.pack_id == pack_id, DamagedChunk.idx == idx)
        )
    bump_generation(session)
    log.warning("chunk store: healed %d damaged chunk(s) with good copies", len(healed))
    return {digest: good[digest] for digest in healed.values()}


def _repoint(
    session: Session, healed: Mapping[tuple[int, int], str], good: Mapping[str, ChunkRef]
) -> None:
    """Rewrite the segments of every file over a healed copy, chunk by chunk."""
    by_pack: dict[int, set[int]] = {}
    for pack_id, idx in healed:
        by_pack.setdefault(pack_id, set()).add(idx)
    files: set[str] = set()
    for pack_id, indices in by_pack.items():
        for sha, first, end in session.execute(
            select(BlobSegment.blob_sha256, BlobSegment.first_chunk, BlobSegment.end_chunk).where(
                BlobSegment.pack_id == pack_id
            )
        ):
            if any(first <= i < end for i in indices):
                files.add(sha)
    tables: dict[int, tuple[str, list[int], list[int]]] = {}

    def table(pack_id: int) -> tuple[str, list[int], list[int]]:
        if pack_id not in tables:
            name, raw = session.execute(
                select(Pack.name, Pack.chunk_table).where(Pack.id == pack_id)
            ).one()
            lengths = [n for _, n in parse_pack_table(bytes(raw))]
            tables[pack_id] = (name, lengths, list(accumulate(lengths, initial=0)))
        return tables[pack_id]

    ids: dict[str, int] = {}
    for sha in sorted(files):
        segments = session.execute(
            select(BlobSegment.pack_id, BlobSegment.first_chunk, BlobSegment.end_chunk)
            .where(BlobSegment.blob_sha256 == sha)
            .order_by(BlobSegment.seq)
        ).all()
        refs: list[ChunkRef] = []
        for pack_id, first, end in segments:
            name, lengths, starts = table(pack_id)
            ids[name] = pack_id
            for i in range(first, end):
                digest = healed.get((pack_id, i))
                refs.append(
                    good[digest] if digest is not None else ChunkRef(name, i, starts[i], lengths[i])
                )
        for ref in refs:
            if ref.pack not in ids:
                ids[ref.pack] = session.execute(
                    select(Pack.id).where(Pack.name == ref.pack)
                ).scalar_one()
        session.execute(delete(BlobSegment).where(BlobSegment.blob_sha256 == sha))
        session.execute(
            BlobSegment.__table__.insert(),
            [
                {
                    "blob_sha256": sha,
                    "seq": seq,
                    "pack_id": ids[s.pack],
                    "first_chunk": s.first_chunk,
                    "end_chunk": s.end_chunk,
                    "file_offset": s.file_offset,
                    "pack_offset": s.pack_offset,
                    "length": s.length,
                }
                for seq, s in enumerate(segments_of(refs))
            ],
        )
