"""Integrity check: the index and the blob store agree, and (optionally) every byte hashes right.

``check_integrity`` lists the store once and compares it with the database:

- **missing**: a blob that a ``blobs`` row or a carton file names is not in the store;
- **wrong_size**: it is there, with another size than its row says;
- **corrupt** (only with ``verify_hashes``): its bytes do not hash to its name
  (the scrub reads every referenced blob, or a random ``sample`` of them);
- **orphans**: in the store, named by no carton (``orphan_files``: the same for
  chunked files, which are rows over packs rather than store objects). They are listed but are not
  a problem by themselves: a push in progress, a ``PUT /api/v1/blobs`` waiting
  for its carton, or a deleted version's bytes that GC has not collected yet.

Chunked files live in packs (``fsck_packs``): a missing or wrong-size pack makes
every file with a segment in it missing or wrong-size; with ``verify_hashes``
every chunk is checked against its BLAKE3 name and every chunked file against
its sha256 after reassembly; damaged packs and chunks are named too.

Every version whose carton names a missing, wrong-size or corrupt blob is
marked ``UNAVAILABLE`` with a reason naming the blob(s). A later clean fsck
does **not** mark it ``READY`` again: an operator restores the blob (or pushes
the carton again) and then loads the model (``POST
/v2/repository/models/{name}/load`` re-verifies and marks it READY), so a
version never flips back to READY without its bytes having been verified.

Whole blobs found corrupt or of the wrong size are recorded in ``damaged_blobs``
(``chunkstore.wholedamage``): ``blobs/missing`` then asks for them and a push
replaces the objects. With ``verify_hashes``, records of objects that hash right
again are dropped (``damage_cleared``).

Any problem also bumps the shared index generation, so no process keeps answering
for a damaged blob from memory (``registry.services.freshness``): the next read
checks the store again, and a small blob's bytes are verified before they are kept.

Problems are re-checked before they are reported (a GC or a push running at
the same time may change the store between the listing and the query).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import select, update

from registry.blobstore import BlobNotFound
from registry.carton.streams import hash_stream
from registry.db.queries import cartons_using, in_chunks, referenced_blobs
from registry.db.tables import Blob, CartonFile, DamagedBlob, Version
from registry.services.chunkstore.wholedamage import (
    CORRUPT,
    WRONG_SIZE,
    forget_blob_damage,
    record_blob_damage,
)
from registry.services.context import RegistryContext
from registry.services.freshness import bump_generation, wait_for_readers
from registry.services.fsck_packs import PackFindings, check_packs
from registry.services.observers import notify

log = logging.getLogger("registry.fsck")
REASON_PREFIX = "fsck: "


@dataclass
class FsckReport:
    missing: list[str] = field(default_factory=list)
    wrong_size: list[str] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    packs_missing: list[str] = field(default_factory=list)
    packs_wrong_size: list[str] = field(default_factory=list)
    corrupt_chunks: list[dict[str, Any]] = field(default_factory=list)
    orphan_packs: list[str] = field(default_factory=list)
    # Chunked files (blob rows) no carton names: an assembled file waiting for its
    # carton, or a deleted version's file GC has not collected yet. Not a problem.
    orphan_files: list[str] = field(default_factory=list)
    # Damage nothing uses any more (healed by a push, or its files deleted): GC drops it.
    unused_packs_lost: list[str] = field(default_factory=list)
    unused_chunks_corrupt: int = 0
    packs_checked: int = 0
    chunks_hashed: int = 0
    affected_cartons: list[str] = field(default_factory=list)
    versions_marked: list[dict[str, Any]] = field(default_factory=list)
    blobs_checked: int = 0
    blobs_hashed: int = 0
    bytes_hashed: int = 0
    # Whole blobs recorded as damaged whose objects hash right again (restored from a
    # backup, or written again): their records were dropped.
    damage_cleared: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.missing
            or self.wrong_size
            or self.corrupt
            or self.packs_missing
            or self.packs_wrong_size
            or self.corrupt_chunks
        )

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def _expected_sizes(ctx: RegistryContext) -> tuple[dict[str, int], set[str]]:
    """Every blob the database says is stored (sha256 → size), and the referenced subset."""
    with ctx.sessions() as session:
        rows = session.execute(select(Blob.sha256, Blob.size, Blob.chunked)).all()
        expected = {sha: int(size) for sha, size, chunked in rows if not chunked}
        chunked = {sha for sha, _, is_chunked in rows if is_chunked}
        referenced: set[str] = set()
        for sha, size in session.execute(
            select(CartonFile.blob_sha256, CartonFile.size).distinct()
        ):
            referenced.add(sha)
            if sha not in chunked:  # a chunked file's bytes are checked through its packs
                expected.setdefault(sha, int(size))
        session.rollback()
    return expected, referenced


def _hash_blob(ctx: RegistryContext, sha: str) -> tuple[str | None, int]:
    try:
        with ctx.blobs.open(sha) as stream:
            return hash_stream(stream)
    except BlobNotFound:
        return None, 0


def _recheck(
    ctx: RegistryContext, hashes: Iterable[str], predicate: Callable[..., bool]
) -> list[str]:
    """Keep the hashes whose problem is still there and whose row or reference still exists."""
    hashes = sorted(set(hashes))
    if not hashes:
        return []
    with ctx.sessions() as session:
        alive: dict[str, int] = {}
        for chunk in in_chunks(hashes):
            alive.update(
                (r[0], int(r[1]))
                for r in session.execute(
                    select(Blob.sha256, Blob.size).where(Blob.sha256.in_(chunk))
                )
            )
            for sha, size in session.execute(
                select(CartonFile.blob_sha256, CartonFile.size)
                .where(CartonFile.blob_sha256.in_(chunk))
                .distinct()
            ):
                alive.setdefault(sha, size)
        session.rollback()
    return [h for h in hashes if h in alive and predicate(h, int(alive[h]))]


def _mark_unavailable(ctx: RegistryContext, problems: dict[str, str], report: FsckReport) -> None:
    """Versions of cartons that name a bad blob → UNAVAILABLE, with a reason naming it."""
    if not problems:
        return
    bad = sorted(problems)
    with ctx.transaction() as session:
        per_carton = cartons_using(session, bad)
        report.affected_cartons = sorted(per_carton)
        for manifest, hashes in sorted(per_carton.items()):
            described = "; ".join(f"blob {h} {problems[h]}" for h in sorted(hashes)[:5])
            if len(hashes) > 5:
                described += f"; and {len(hashes) - 5} more"
            reason = f"{REASON_PREFIX}{described}"
            versions = session.scalars(
                select(Version).where(Version.manifest_sha256 == manifest)
            ).all()
            for version in versions:
                report.versions_marked.append(
                    {
                        "model_id": version.model_id,
                        "version": version.version,
                        "manifest_sha256": manifest,
                    }
                )
            session.execute(
                update(Version)
                .where(Version.manifest_sha256 == manifest)
                .values(state="UNAVAILABLE", state_reason=reason)
            )


def check_integrity(
    ctx: RegistryContext,
    verify_hashes: bool = False,
    sample: int | None = None,
    *,
    mark: bool = True,
) -> FsckReport:
    """Compare the database with the store (module docstring); mark broken versions UNAVAILABLE."""
    report = FsckReport()
    expected, referenced = _expected_sizes(ctx)
    stored: dict[str, int] = {info.sha256: info.size for info in ctx.blobs.iter_blobs()}
    report.blobs_checked = len(expected)

    missing = [sha for sha in expected if sha not in stored]
    wrong = [sha for sha in expected if sha in stored and stored[sha] != expected[sha]]
    orphans = [sha for sha in stored if sha not in referenced]

    def still_missing(sha: str, _size: int) -> bool:
        return ctx.blobs.stat(sha) is None

    def still_wrong(sha: str, size: int) -> bool:
        actual = ctx.blobs.stat(sha)
        return actual is not None and actual != size

    report.missing = _recheck(ctx, missing, still_missing)
    report.wrong_size = _recheck(ctx, wrong, still_wrong)
    if orphans:
        with ctx.sessions() as session:
            ordered = sorted(orphans)
            still_referenced = referenced_blobs(session, ordered)
            session.rollback()
        report.orphans = [h for h in ordered if h not in still_referenced]

    if verify_hashes:
        bad_already = set(report.missing) | set(report.wrong_size)
        to_hash = sorted(sha for sha in referenced if sha in stored and sha not in bad_already)
        if sample is not None and sample < len(to_hash):
            to_hash = sorted(random.sample(to_hash, max(0, sample)))
        corrupt: list[str] = []
        good: set[str] = set()
        for sha in to_hash:
            actual, size = _hash_blob(ctx, sha)
            report.blobs_hashed += 1
            report.bytes_hashed += size
            if actual is not None and actual != sha:
                corrupt.append(sha)
            elif actual == sha:
                good.add(sha)
        report.corrupt = corrupt
        report.damage_cleared = _recheck_records(ctx, good)
    # Whole objects found damaged are recorded: negotiation asks for them, a push replaces
    # them (chunked files' damage is recorded by chunk, in ``check_packs``).
    record_blob_damage(ctx, report.corrupt, CORRUPT, "fsck")
    record_blob_damage(ctx, report.wrong_size, WRONG_SIZE, "fsck")

    packs = PackFindings()
    check_packs(ctx, verify_hashes, sample, packs)
    report.packs_missing, report.packs_wrong_size = packs.packs_missing, packs.packs_wrong_size
    report.corrupt_chunks, report.orphan_packs = packs.corrupt_chunks, packs.orphan_packs
    report.packs_checked, report.chunks_hashed = packs.packs_checked, packs.chunks_hashed
    report.unused_packs_lost = packs.unused_packs_lost
    report.unused_chunks_corrupt = packs.unused_chunks_corrupt
    report.orphan_files = _orphan_files(ctx, referenced)
    report.blobs_checked += len(packs.files)
    report.blobs_hashed += packs.files_hashed
    report.bytes_hashed += packs.bytes_hashed
    for sha, why in sorted(packs.files.items()):
        kind = (
            report.missing
            if "missing" in why
            else report.wrong_size
            if "wrong size" in why
            else report.corrupt
        )
        kind.append(sha)

    problems: dict[str, str] = {sha: why for sha, why in packs.files.items()}
    for sha in report.missing:
        problems.setdefault(sha, "is missing from the blob store")
    for sha in report.wrong_size:
        problems.setdefault(
            sha, f"has the wrong size in the blob store (expected {expected.get(sha)})"
        )
    for sha in report.corrupt:
        problems.setdefault(sha, "is corrupt (its bytes do not hash to its sha256)")
    if mark:
        _mark_unavailable(ctx, problems, report)
    else:
        report.affected_cartons = _affected(ctx, problems)
    if problems:
        with ctx.transaction() as session:
            bump_generation(session)
        wait_for_readers(ctx)
    notify(ctx.observers.fsck, report)
    if not report.ok:
        log.warning(
            "fsck: %d missing, %d wrong size, %d corrupt blobs; %d cartons affected",
            len(report.missing),
            len(report.wrong_size),
            len(report.corrupt),
            len(report.affected_cartons),
        )
    return report


def _recheck_records(ctx: RegistryContext, good: set[str]) -> list[str]:
    """Drop the damage records of whole blobs that hash right now: those of ``good``
    (just hashed), and any other recorded one, hashed here (they are few). A record of a
    blob with neither a row nor an object has nothing left to heal: dropped too."""
    with ctx.sessions() as session:
        recorded = set(session.scalars(select(DamagedBlob.sha256)))
        if not recorded:
            return []
        rows = {
            sha for (sha,) in session.execute(select(Blob.sha256).where(Blob.sha256.in_(recorded)))
        }
        session.rollback()
    cleared = recorded & good
    for sha in sorted(recorded - good):
        actual, _ = _hash_blob(ctx, sha)
        if actual == sha or (actual is None and sha not in rows):
            cleared.add(sha)
    if not cleared:
        return []
    with ctx.transaction() as session:
        dropped = forget_blob_damage(session, cleared)
    if dropped:
        log.warning("fsck: %d whole blob(s) recorded as damaged hash right now", len(dropped))
        ctx.caches.index_changed()
    return sorted(dropped)


def _orphan_files(ctx: RegistryContext, referenced: set[str]) -> list[str]:
    """Chunked files no carton names (re-checked: a push may have named one meanwhile)."""
    with ctx.sessions() as session:
        chunked = session.scalars(select(Blob.sha256).where(Blob.chunked.is_(True))).all()
        candidates = sorted(sha for sha in chunked if sha not in referenced)
        still = referenced_blobs(session, candidates) if candidates else set()
        session.rollback()
    return [sha for sha in candidates if sha not in still]


def _affected(ctx: RegistryContext, problems: dict[str, str]) -> list[str]:
    with ctx.sessions() as session:
        found = cartons_using(session, sorted(problems))
        session.rollback()
    return sorted(found)
