"""Garbage collection of packs: the chunk store's half of ``gc`` (docs/chunk-store.md).

Runs after the blob sweep (which deletes unreferenced ``blobs`` rows and with
them their segments), under the same GC run lock:

- **dead packs**: no segment uses any of their chunks, created before the
  cutoff, not leased: rows and object deleted;
- **packs holding dead chunks**, most dead bytes first, until the dead bytes
  left in the packs judged are at most ``max_unused`` (``REGISTRY_GC_MAX_UNUSED``,
  default 2%) of the live bytes plus ``UNUSED_SLACK_BYTES`` (1 MiB), as restic's
  ``prune --max-unused`` bounds what it leaves: the live chunks are copied into a
  new pack, and in one transaction
  the new pack's row goes in, chunk rows and segments move to it, and the old
  pack is marked retired. Readers that loaded the old segments keep reading
  the old object until it is deleted;
- **retired packs** older than the grace period: object and row deleted;
- **orphan objects** (a pack in the store without a row: a rejected or crashed
  push) older than the grace period and ``lease_timeout``, not leased: deleted.

Every deletion or rewrite re-checks leases and liveness inside a transaction
holding ``lock_blobs_exclusive``: a push leases a pack (under the shared side
of that lock) before it trusts a chunk in it, so GC never takes a pack a push
relies on, and a push never relies on a pack GC took.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from registry.blobstore.base import new_pack_name
from registry.db.queries import in_chunks
from registry.db.tables import BlobSegment, Chunk, DamagedChunk, Pack
from registry.services.chunkstore.layout import pack_table_entry, parse_pack_table
from registry.services.context import RegistryContext
from registry.services.freshness import bump_generation, wait_for_readers
from registry.services.leases import live_leased_packs, lock_blobs_exclusive

log = logging.getLogger("registry.gc")

UNUSED_SLACK_BYTES = 1024 * 1024
"""Dead bytes GC may leave in packs beyond ``max_unused`` of the live bytes: rewriting a
pack to free less than this is not worth its copy."""


@dataclass
class PackReport:
    packs_deleted: int = 0
    packs_rewritten: int = 0
    pack_bytes_freed: int = 0
    orphan_packs_deleted: int = 0
    packs_skipped_leased: int = 0


@dataclass(frozen=True)
class _Liveness:
    id: int
    name: str
    size: int
    table: list[tuple[str, int]]
    live: frozenset[int]

    @property
    def live_bytes(self) -> int:
        return sum(self.table[i][1] for i in self.live)

    @property
    def dead_bytes(self) -> int:
        return self.size - self.live_bytes


def _live_chunks(session: Session, pack_id: int, gone: frozenset[str]) -> frozenset[int]:
    """Chunks of the pack that segments use, those of the ``gone`` files aside."""
    live: set[int] = set()
    for sha, first, end in session.execute(
        select(BlobSegment.blob_sha256, BlobSegment.first_chunk, BlobSegment.end_chunk).where(
            BlobSegment.pack_id == pack_id
        )
    ):
        if sha not in gone:
            live.update(range(first, end))
    return frozenset(live)


def _candidates(ctx: RegistryContext, cutoff: datetime, gone: frozenset[str]) -> list[_Liveness]:
    """Packs old enough to judge, with the chunks their segments use now."""
    with ctx.sessions() as session:
        packs = session.execute(
            select(Pack.id, Pack.name, Pack.size, Pack.chunk_table).where(
                Pack.retired_at.is_(None), Pack.created_at < cutoff
            )
        ).all()
        live: dict[int, set[int]] = {}
        for sha, pack_id, first, end in session.execute(
            select(
                BlobSegment.blob_sha256,
                BlobSegment.pack_id,
                BlobSegment.first_chunk,
                BlobSegment.end_chunk,
            )
        ):
            if sha not in gone:
                live.setdefault(pack_id, set()).update(range(first, end))
        session.rollback()
    return [
        _Liveness(
            p.id,
            p.name,
            int(p.size),
            parse_pack_table(p.chunk_table),
            frozenset(live.get(p.id, ())),
        )
        for p in packs
    ]


def _leased(session: Session, ctx: RegistryContext, name: str) -> bool:
    return bool(live_leased_packs(session, [name], ctx.settings.lease_timeout))


def _delete_dead(
    ctx: RegistryContext, pack: _Liveness, report: PackReport, dry_run: bool, gone: frozenset[str]
) -> None:
    with ctx.transaction() as session:
        lock_blobs_exclusive(session)
        if _leased(session, ctx, pack.name):
            report.packs_skipped_leased += 1
            return
        if _live_chunks(session, pack.id, gone):
            return  # a push indexed a file using it since the mark
        if dry_run:
            report.packs_deleted += 1
            report.pack_bytes_freed += pack.size
            return
        session.execute(delete(Chunk).where(Chunk.pack_id == pack.id))
        session.execute(delete(Pack).where(Pack.id == pack.id))
    ctx.blobs.delete_pack(pack.name)
    report.packs_deleted += 1
    report.pack_bytes_freed += pack.size


def _rewrite(ctx: RegistryContext, pack: _Liveness, report: PackReport, dry_run: bool) -> bool:
    """Copy the live chunks into a new pack; move rows to it; retire the old one.

    False when the pack was left as it is (leased, or used anew since the mark, or a
    live chunk of it is recorded damaged: the copy would carry the bad bytes away from
    their record; a push heals them first, chunkstore.damage).
    """
    with ctx.sessions() as session:
        damaged = set(
            session.scalars(select(DamagedChunk.idx).where(DamagedChunk.pack_id == pack.id))
        )
        session.rollback()
    if damaged & set(pack.live):
        return False
    if dry_run:
        report.packs_rewritten += 1
        report.pack_bytes_freed += pack.dead_bytes
        return True
    offsets = [0]
    for _, length in pack.table:
        offsets.append(offsets[-1] + length)
    order = sorted(pack.live)
    ranges: list[tuple[str, int, int]] = []
    for idx in order:
        if ranges and ranges[-1][2] == offsets[idx]:
            ranges[-1] = (pack.name, ranges[-1][1], offsets[idx + 1])
        else:
            ranges.append((pack.name, offsets[idx], offsets[idx + 1]))
    writer = ctx.blobs.new_pack(new_pack_name())
    try:
        for data in ctx.blobs.iter_pack_ranges(ranges):
            writer.write(data)
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    new_index = {old: new for new, old in enumerate(order)}
    new_offset: dict[int, int] = {}
    at = 0
    for old in order:
        new_offset[old] = at
        at += pack.table[old][1]
    table = b"".join(pack_table_entry(*pack.table[old]) for old in order)
    moved = False
    try:
        with ctx.transaction() as session:
            lock_blobs_exclusive(session)
            if _leased(session, ctx, pack.name):
                report.packs_skipped_leased += 1
                return False
            if _live_chunks(session, pack.id, frozenset()) != pack.live:
                return False  # a push indexed a file using it since the mark: next run
            row = Pack(
                name=writer.name, size=writer.size, chunk_count=len(order), chunk_table=table
            )
            session.add(row)
            session.flush()
            for old in order:
                session.execute(
                    update(Chunk)
                    .where(Chunk.hash == pack.table[old][0], Chunk.pack_id == pack.id)
                    .values(pack_id=row.id, idx=new_index[old], offset=new_offset[old])
                )
            session.execute(delete(Chunk).where(Chunk.pack_id == pack.id))
            for seg in session.execute(
                select(
                    BlobSegment.blob_sha256,
                    BlobSegment.seq,
                    BlobSegment.first_chunk,
                    BlobSegment.end_chunk,
                ).where(BlobSegment.pack_id == pack.id)
            ).all():
                session.execute(
                    update(BlobSegment)
                    .where(BlobSegment.blob_sha256 == seg.blob_sha256, BlobSegment.seq == seg.seq)
                    .values(
                        pack_id=row.id,
                        first_chunk=new_index[seg.first_chunk],
                        end_chunk=new_index[seg.end_chunk - 1] + 1,
                        pack_offset=new_offset[seg.first_chunk],
                    )
                )
            session.execute(
                update(Pack).where(Pack.id == pack.id).values(retired_at=datetime.now(UTC))
            )
            bump_generation(session)  # cached layouts re-read their segments
        moved = True
    finally:
        if not moved:
            ctx.blobs.delete_pack(writer.name)
    report.packs_rewritten += 1
    return True


def _delete_retired(
    ctx: RegistryContext, cutoff: datetime, report: PackReport, dry_run: bool
) -> None:
    with ctx.sessions() as session:
        retired = session.execute(
            select(Pack.id, Pack.name, Pack.size).where(Pack.retired_at < cutoff)
        ).all()
        session.rollback()
    if not retired:
        return
    if not dry_run:
        # Segments left these packs when they were rewritten (and the generation bumped
        # then); bump again and wait, so no process still reads them from memory.
        with ctx.transaction() as session:
            bump_generation(session)
        wait_for_readers(ctx)
    for pack_id, name, size in retired:
        report.pack_bytes_freed += int(size)
        if dry_run:
            continue
        ctx.blobs.delete_pack(name)
        with ctx.transaction() as session:
            session.execute(delete(Pack).where(Pack.id == pack_id))


def _delete_orphans(
    ctx: RegistryContext, cutoff: datetime, report: PackReport, dry_run: bool
) -> None:
    old = {p.name: p.size for p in ctx.blobs.iter_packs() if p.modified < cutoff}
    if not old:
        return
    with ctx.transaction() as session:
        lock_blobs_exclusive(session)
        indexed: set[str] = set()
        for batch in in_chunks(sorted(old)):
            indexed.update(session.scalars(select(Pack.name).where(Pack.name.in_(batch))))
        leased = live_leased_packs(session, old, ctx.settings.lease_timeout)
        orphans = sorted(set(old) - indexed - leased)
        if not dry_run:
            for name in orphans:
                ctx.blobs.delete_pack(name)
    report.orphan_packs_deleted += len(orphans)
    report.pack_bytes_freed += sum(old[n] for n in orphans)


def collect_packs(
    ctx: RegistryContext,
    grace_seconds: float,
    report: PackReport,
    dry_run: bool,
    gone: frozenset[str] = frozenset(),
    max_unused: float | None = None,
) -> None:
    """The pack phase of a GC run (module docstring); the caller holds the GC run lock.

    ``gone``: files whose rows a dry run's blob sweep would have deleted (a real run
    has deleted them), so that a dry run judges the packs as the real run would.
    ``max_unused``: the share of the live bytes that may stay dead in packs (default:
    the ``gc_max_unused`` setting).
    """
    if max_unused is None:
        max_unused = ctx.settings.gc_max_unused
    if max_unused < 0:
        raise ValueError("max_unused cannot be negative")
    now = datetime.now(UTC)
    cutoff = now - timedelta(seconds=grace_seconds)
    _delete_retired(ctx, cutoff, report, dry_run)
    partly_dead: list[_Liveness] = []
    live_total = 0
    for pack in _candidates(ctx, cutoff, gone):
        live_total += pack.live_bytes
        if not pack.live:
            _delete_dead(ctx, pack, report, dry_run, gone)
        elif pack.dead_bytes:
            partly_dead.append(pack)
    allowed = max_unused * live_total + UNUSED_SLACK_BYTES
    dead = sum(p.dead_bytes for p in partly_dead)
    for pack in sorted(partly_dead, key=lambda p: (-p.dead_bytes, p.name)):
        if dead <= allowed:
            break
        if _rewrite(ctx, pack, report, dry_run):
            dead -= pack.dead_bytes
    orphan_age = max(grace_seconds, ctx.settings.lease_timeout)
    _delete_orphans(ctx, now - timedelta(seconds=orphan_age), report, dry_run)
