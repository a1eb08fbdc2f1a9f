"""Online garbage collection: mark and sweep while pushes go on.

One GC at a time: on Postgres a session-level ``pg_try_advisory_lock`` on a
dedicated key (held on one connection for the whole run, so it works across
app servers and hosts); on SQLite an ``flock`` on ``<data dir>/gc.lock``.
A second GC fails at once with ``GcBusy`` ("another GC is running").

Mark: candidates are blobs in the store that no ``carton_files`` row names and
that were last modified before ``now - grace``, plus ``blobs`` rows that no
carton references and that were created before ``now - grace``.

Sweep, in small batches, each one transaction (see ``registry.services.leases``):
take ``lock_blobs_exclusive``; drop candidates named by a live lease, *then*
drop those referenced now (in this order: a push releases its lease in the
transaction that adds its references, so a candidate that lost its lease
between the two checks shows up as referenced); delete the ``blobs`` row (the
foreign key from ``carton_files`` is a last safety net), delete the store
object, commit. A push that checked the store before GC's transaction is
visible to it through its lease; a push that checks after it finds the blob
gone and writes it again.

Then the packs (``gc_packs``): dead ones deleted, ones holding dead chunks
rewritten (most dead bytes first) until at most ``max_unused`` of the live
bytes plus 1 MiB stays dead, retired and orphan ones deleted after the grace
period.

Also: expired leases (heartbeat older than ``lease_timeout``) are deleted,
and stale temp files go: the blob store's incomplete uploads and the spooled
request bodies in ``<data dir>/uploads``. Those are judged by age, with the
age threshold at least ``lease_timeout`` even under ``--grace 0s``: a file
that is still being written is touched at every write, and a dead push's
files are collectable once its lease would have expired. A spool file that
another process holds an ``flock`` on is never removed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import delete, exists, func, select, text

from registry.db.queries import in_chunks, referenced_blobs
from registry.db.tables import Blob, BlobUpload, CartonFile, LeaseBlob, UploadLease
from registry.errors import GcBusy
from registry.services.caches import changes_index
from registry.services.chunkstore.wholedamage import forget_blob_damage
from registry.services.context import RegistryContext
from registry.services.freshness import bump_generation, wait_for_readers
from registry.services.gc_packs import PackReport, collect_packs
from registry.services.leases import live_leased, lock_blobs_exclusive
from registry.services.observers import notify
from registry.services.uploads import uploads_dir

log = logging.getLogger("registry.gc")

GC_RUN_LOCK_ID = 0x6361_7274_6F6E_0003  # distinct from the blob lock (..0002) in leases.py
BATCH = 50

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]  # None off POSIX: checked where used


@dataclass
class GcReport:
    blobs_deleted: int = 0
    bytes_freed: int = 0  # whole blobs and packs deleted (rewritten packs: once retired ones go)
    temp_removed: int = 0
    candidates: int = 0
    skipped_leased: int = 0
    skipped_referenced: int = 0
    leases_expired: int = 0
    uploads_forgotten: int = 0  # blob_uploads rows past the grace setting (private_dedup)
    duration: float = 0.0
    dry_run: bool = False
    grace_seconds: float = 0.0
    deleted: list[str] = field(default_factory=list)
    packs: PackReport = field(default_factory=PackReport)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@contextlib.contextmanager
def gc_lock(ctx: RegistryContext) -> Iterator[None]:
    """Hold the one-GC-at-a-time lock, or raise ``GcBusy``."""
    if ctx.engine.dialect.name == "postgresql":
        with ctx.engine.connect() as conn:
            got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": GC_RUN_LOCK_ID})
            conn.commit()
            if not got.scalar():
                raise GcBusy("another GC is running (Postgres advisory lock is held)")
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": GC_RUN_LOCK_ID})
                conn.commit()
        return
    data_dir = Path(ctx.settings.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "gc.lock"
    with open(path, "a+b") as handle:
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                raise GcBusy(f"another GC is running (lock file {path} is held)") from exc
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _mark(ctx: RegistryContext, cutoff: datetime) -> dict[str, int]:
    """Candidates (sha256 → size): old, unreferenced, in the store or as rows."""
    candidates: dict[str, int] = {}
    for info in ctx.blobs.iter_blobs():
        if info.modified < cutoff:
            candidates[info.sha256] = info.size
    with ctx.sessions() as session:
        if candidates:
            for sha in referenced_blobs(session, list(candidates)):
                candidates.pop(sha, None)
            # An old object whose row is young was just uploaded again (a PUT of bytes a
            # crashed push had left): the grace period counts from the row.
            hashes = list(candidates)
            for chunk in in_chunks(hashes):
                young = session.execute(
                    select(Blob.sha256)
                    .where(Blob.sha256.in_(chunk))
                    .where(Blob.created_at >= cutoff)
                )
                for (sha,) in young:
                    candidates.pop(sha, None)
        rows = session.execute(
            select(Blob.sha256, Blob.size)
            .where(Blob.created_at < cutoff)
            .where(~exists().where(CartonFile.blob_sha256 == Blob.sha256))
        )
        for sha, size in rows:
            candidates.setdefault(sha, int(size))
        session.rollback()
    return candidates


def _expire_leases(ctx: RegistryContext, dry_run: bool) -> int:
    cutoff = datetime.now(UTC) - timedelta(seconds=ctx.settings.lease_timeout)
    with ctx.transaction() as session:
        dead = [
            r[0]
            for r in session.execute(
                select(UploadLease.id).where(UploadLease.heartbeat_at < cutoff)
            )
        ]
        if dead and not dry_run:
            for chunk in in_chunks(dead):
                session.execute(delete(LeaseBlob).where(LeaseBlob.lease_id.in_(chunk)))
                session.execute(delete(UploadLease).where(UploadLease.id.in_(chunk)))
    return len(dead)


def _forget_uploads(ctx: RegistryContext, dry_run: bool) -> int:
    """Who uploaded what (``blob_uploads``) matters for ``gc_grace`` only (private_dedup):
    older rows go, so a token that never uploads again leaves nothing behind."""
    cutoff = datetime.now(UTC) - timedelta(seconds=ctx.settings.gc_grace)
    old = BlobUpload.uploaded_at < cutoff
    with ctx.transaction() as session:
        count = int(session.scalar(select(func.count()).select_from(BlobUpload).where(old)) or 0)
        if count and not dry_run:
            session.execute(delete(BlobUpload).where(old))
        return count


def _sweep(
    ctx: RegistryContext, candidates: dict[str, int], report: GcReport, dry_run: bool
) -> None:
    hashes = sorted(candidates)
    timeout = ctx.settings.lease_timeout
    for chunk in in_chunks(hashes, BATCH):
        batch = list(chunk)
        with ctx.transaction() as session:
            lock_blobs_exclusive(session)
            # Leases first, references second (see the module docstring).
            leased = live_leased(session, batch, timeout)
            report.skipped_leased += len(leased)
            batch = [h for h in batch if h not in leased]
            referenced = referenced_blobs(session, batch)
            report.skipped_referenced += len(referenced)
            batch = [h for h in batch if h not in referenced]
            if not batch:
                continue
            sizes = {
                r[0]: int(r[1])
                for r in session.execute(
                    select(Blob.sha256, Blob.size).where(Blob.sha256.in_(batch))
                )
            }
            if dry_run:
                for sha in batch:
                    report.blobs_deleted += 1
                    report.bytes_freed += ctx.blobs.stat(sha) or 0  # a chunked file: its packs
                    report.deleted.append(sha)
                continue
            session.execute(delete(Blob).where(Blob.sha256.in_(batch)))
            forget_blob_damage(session, batch)  # nothing left to heal
            bump_generation(session)
            session.flush()
            for sha in batch:
                stored = ctx.blobs.stat(sha)
                removed = ctx.blobs.delete(sha) if stored is not None else False
                if removed or sha in sizes:
                    report.blobs_deleted += 1
                    report.bytes_freed += int(stored) if removed and stored is not None else 0
                    report.deleted.append(sha)


def _clean_spool(ctx: RegistryContext, older_than: float, dry_run: bool) -> int:
    directory = uploads_dir(ctx)
    cutoff = time.time() - older_than
    removed = 0
    for entry in os.scandir(directory):
        try:
            if not entry.is_file(follow_symlinks=False) or entry.stat().st_mtime > cutoff:
                continue
            if dry_run:
                removed += 1
                continue
            with open(entry.path, "rb") as handle:
                if fcntl is not None:
                    try:
                        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except OSError:
                        continue  # a push holds it: still in use
                os.unlink(entry.path)
            removed += 1
        except FileNotFoundError:
            continue
    return removed


@changes_index
def collect_garbage(
    ctx: RegistryContext,
    grace_seconds: float,
    dry_run: bool = False,
    max_unused: float | None = None,
) -> GcReport:
    """Delete unreferenced, unleased blobs older than ``grace_seconds``, and repack until
    at most ``max_unused`` (default: the ``gc_max_unused`` setting) of the live bytes
    plus 1 MiB stays dead in packs (module docstring)."""
    if grace_seconds < 0:
        raise ValueError("the grace period cannot be negative")
    if max_unused is not None and not max_unused >= 0:
        raise ValueError("max_unused cannot be negative")
    started = time.monotonic()
    report = GcReport(dry_run=dry_run, grace_seconds=grace_seconds)
    try:
        with gc_lock(ctx):
            cutoff = datetime.now(UTC) - timedelta(seconds=grace_seconds)
            report.leases_expired = _expire_leases(ctx, dry_run)
            report.uploads_forgotten = _forget_uploads(ctx, dry_run)
            candidates = _mark(ctx, cutoff)
            report.candidates = len(candidates)
            _sweep(ctx, candidates, report, dry_run)
            gone = frozenset(report.deleted) if dry_run else frozenset()
            collect_packs(ctx, grace_seconds, report.packs, dry_run, gone, max_unused)
            report.bytes_freed += report.packs.pack_bytes_freed
            temp_age = max(grace_seconds, ctx.settings.lease_timeout)
            if not dry_run:
                report.temp_removed += ctx.blobs.clean_stale_uploads(temp_age)
            report.temp_removed += _clean_spool(ctx, temp_age, dry_run)
    except GcBusy:
        notify(ctx.observers.gc, None, "busy")
        raise
    except BaseException:
        notify(ctx.observers.gc, None, "error")
        raise
    if (report.blobs_deleted or report.packs.packs_rewritten) and not dry_run:
        wait_for_readers(ctx)  # no process serves a collected blob from memory after this
    report.duration = time.monotonic() - started
    notify(ctx.observers.gc, report, "dry_run" if dry_run else "ok")
    log.info(
        "gc: %d blobs deleted, %d bytes freed, %d packs deleted and %d rewritten "
        "(%d bytes freed), %d temp files removed, %d leased skipped%s",
        report.blobs_deleted,
        report.bytes_freed,
        report.packs.packs_deleted + report.packs.orphan_packs_deleted,
        report.packs.packs_rewritten,
        report.packs.pack_bytes_freed,
        report.temp_removed,
        report.skipped_leased,
        " (dry run)" if dry_run else "",
    )
    return report
