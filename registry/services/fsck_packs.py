"""Integrity of the chunk store: packs against their rows, chunks against their names.

``check_packs`` compares every live pack row with the store listing (missing,
wrong size) and names the chunked files those packs damage. With hashes it
reads each pack once, front to back, and checks every chunk's BLAKE3 against
the pack's chunk table, naming each bad chunk (pack, index, BLAKE3) and the files
whose segments cover it; then it reassembles every chunked file and checks its
sha256, so a file is reported whatever broke it. What it finds damaged is
recorded in the index (``chunkstore.damage``) so negotiation asks for those
bytes again and a push heals them; damage no file or chunk row uses any more
(what healing left behind) is counted, not reported. Problems are re-checked
before they are reported, as ``fsck`` does for whole blobs: a pack whose row GC
deleted meanwhile, or a file whose chunks GC moved, is no problem.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from registry.blobstore.errors import PackNotFound
from registry.carton.streams import CHUNK
from registry.chunking import chunk_hash
from registry.db.queries import in_chunks
from registry.db.tables import Blob, BlobSegment, Chunk, Pack
from registry.services.chunkstore.damage import CORRUPT, MISSING, record_damage
from registry.services.chunkstore.layout import parse_pack_table
from registry.services.chunkstore.reader import StoredFile, iter_file, load_file, load_files
from registry.services.context import RegistryContext


@dataclass
class PackFindings:
    packs_missing: list[str] = field(default_factory=list)
    packs_wrong_size: list[str] = field(default_factory=list)
    corrupt_chunks: list[dict[str, Any]] = field(default_factory=list)  # pack, idx, hash, files
    orphan_packs: list[str] = field(default_factory=list)
    packs_checked: int = 0
    chunks_hashed: int = 0
    # Chunked files (sha256 -> why) that the above damage, or whose sha256 is wrong.
    files: dict[str, str] = field(default_factory=dict)
    bytes_hashed: int = 0
    files_hashed: int = 0
    # Damage nothing uses any more (healed, or its files deleted): no problem; GC drops it.
    unused_packs_lost: list[str] = field(default_factory=list)
    unused_chunks_corrupt: int = 0


def _packs(ctx: RegistryContext) -> tuple[dict[str, tuple[int, int]], set[str]]:
    """Live packs (name -> (id, size)), and the retired ones' names (still rows, not orphans)."""
    with ctx.sessions() as session:
        rows = session.execute(select(Pack.name, Pack.id, Pack.size, Pack.retired_at)).all()
        session.rollback()
    live = {r.name: (r.id, int(r.size)) for r in rows if r.retired_at is None}
    return live, {r.name for r in rows if r.retired_at is not None}


def _chunk_table(ctx: RegistryContext, pack_id: int) -> bytes:
    with ctx.sessions() as session:
        table = session.scalar(select(Pack.chunk_table).where(Pack.id == pack_id))
        session.rollback()
    return bytes(table or b"")


def _live_rows(ctx: RegistryContext, names: list[str]) -> set[str]:
    """Those of ``names`` that still have a live row (GC may have taken one meanwhile)."""
    found: set[str] = set()
    with ctx.sessions() as session:
        for batch in in_chunks(names):
            found.update(
                session.scalars(
                    select(Pack.name).where(Pack.name.in_(batch), Pack.retired_at.is_(None))
                )
            )
        session.rollback()
    return found


def _segments(ctx: RegistryContext, pack_id: int) -> list[tuple[str, int, int]]:
    """(file sha256, first chunk, end chunk) of every segment in the pack."""
    with ctx.sessions() as session:
        rows = session.execute(
            select(BlobSegment.blob_sha256, BlobSegment.first_chunk, BlobSegment.end_chunk).where(
                BlobSegment.pack_id == pack_id
            )
        ).all()
        session.rollback()
    return [(sha, int(first), int(end)) for sha, first, end in rows]


def _indexed_copies(ctx: RegistryContext, pack_id: int, indices: set[int]) -> set[int]:
    """Those of ``indices`` that a ``chunks`` row names as its chunk's copy."""
    with ctx.sessions() as session:
        found = set(
            session.scalars(
                select(Chunk.idx).where(Chunk.pack_id == pack_id, Chunk.idx.in_(sorted(indices)))
            )
        )
        session.rollback()
    return {int(i) for i in found}


def _files_covering(segments: list[tuple[str, int, int]], idx: int | None) -> list[str]:
    """Files with a segment covering chunk ``idx`` (any segment when None)."""
    return sorted({sha for sha, first, end in segments if idx is None or first <= idx < end})


def _verify_pack(ctx: RegistryContext, name: str, table: bytes, findings: PackFindings) -> set[int]:
    """Chunk indices whose bytes do not hash to their names."""
    entries = parse_pack_table(table)
    bad: set[int] = set()
    pending = bytearray()
    idx = 0
    total = sum(length for _, length in entries)
    for data in ctx.blobs.iter_pack_ranges([(name, 0, total)], CHUNK):
        pending += data
        while idx < len(entries) and len(pending) >= entries[idx][1]:
            digest, length = entries[idx]
            if chunk_hash(memoryview(pending)[:length]) != digest:
                bad.add(idx)
            del pending[:length]
            findings.chunks_hashed += 1
            idx += 1
    findings.bytes_hashed += total
    return bad


def _lost(ctx: RegistryContext, name: str, size: int, stored: dict[str, int]) -> str | None:
    """How the pack's object disagrees with its row (None: it does not)."""
    actual = stored[name] if name in stored else ctx.blobs.pack_size(name)
    if actual is None:
        return "missing"
    if actual != size:
        return "wrong size"
    return None


def _report_lost(
    ctx: RegistryContext, name: str, pack_id: int, why: str, size: int, findings: PackFindings
) -> None:
    """A lost pack is recorded as damaged (every chunk); a problem while a file uses it."""
    record_damage(ctx, name, None, MISSING, "fsck")
    files = _files_covering(_segments(ctx, pack_id), None)
    if not files:  # every file that used it was healed or deleted: GC drops its row
        findings.unused_packs_lost.append(name)
        return
    if why == "missing":
        findings.packs_missing.append(name)
        problem = f"is missing pack {name} from the blob store"
    else:
        findings.packs_wrong_size.append(name)
        problem = f"has pack {name} of the wrong size in the blob store (expected {size})"
    for sha in files:
        findings.files.setdefault(sha, problem)


def check_packs(
    ctx: RegistryContext, verify_hashes: bool, sample: int | None, findings: PackFindings
) -> None:
    packs, retired = _packs(ctx)
    stored = {p.name: p.size for p in ctx.blobs.iter_packs()}
    findings.packs_checked = len(packs)
    findings.orphan_packs = sorted(set(stored) - set(packs) - retired)
    lost = {
        name: why
        for name, (_, size) in sorted(packs.items())
        if (why := _lost(ctx, name, size, stored)) is not None
    }
    # Re-checked: GC deletes a dead pack's rows, then its object, while we looked.
    live = _live_rows(ctx, sorted(lost)) if lost else set()
    for name, why in lost.items():
        if name in live:
            pack_id, size = packs[name]
            _report_lost(ctx, name, pack_id, why, size, findings)
    if not verify_hashes:
        return

    to_verify = sorted(name for name in packs if name not in lost)
    if sample is not None and sample < len(to_verify):
        to_verify = sorted(random.sample(to_verify, max(0, sample)))
    for name in to_verify:
        pack_id, size = packs[name]
        table = _chunk_table(ctx, pack_id)
        try:
            bad = _verify_pack(ctx, name, table, findings)
        except PackNotFound:  # deleted or truncated since the listing
            why = _lost(ctx, name, size, {})
            if why is not None and name in _live_rows(ctx, [name]):
                _report_lost(ctx, name, pack_id, why, size, findings)
            continue
        if not bad:
            continue
        entries = parse_pack_table(table)
        segments = _segments(ctx, pack_id)
        indexed = _indexed_copies(ctx, pack_id, bad)
        used = {i for i in bad if _files_covering(segments, i) or i in indexed}
        record_damage(ctx, name, sorted(used), CORRUPT, "fsck")
        findings.unused_chunks_corrupt += len(bad - used)
        for i in sorted(used):
            files = _files_covering(segments, i)
            findings.corrupt_chunks.append(
                {"pack": name, "idx": i, "hash": entries[i][0], "files": files}
            )
            for sha in files:
                findings.files.setdefault(sha, f"has corrupt chunk {i} in pack {name}")

    with ctx.sessions() as session:
        chunked = sorted(session.scalars(select(Blob.sha256).where(Blob.chunked.is_(True))))
        session.rollback()
    todo = [sha for sha in chunked if sha not in findings.files]
    if sample is not None and sample < len(todo):
        todo = sorted(random.sample(todo, max(0, sample)))
    for batch_start in range(0, len(todo), 100):
        with ctx.sessions() as session:
            layouts = load_files(session, todo[batch_start : batch_start + 100])
            session.rollback()
        for sha, stored_file in layouts.items():
            problem = _reassemble(ctx, stored_file, findings)
            if problem is not None:
                findings.files[sha] = problem


def _digest(ctx: RegistryContext, stored_file: StoredFile) -> str:
    h = hashlib.sha256()
    for data in iter_file(ctx.blobs, stored_file):
        h.update(data)
    return h.hexdigest()


def _reassemble(
    ctx: RegistryContext, stored_file: StoredFile, findings: PackFindings
) -> str | None:
    """What is wrong with the file's bytes once reassembled, or None."""
    try:
        actual = _digest(ctx, stored_file)
    except PackNotFound as exc:
        # GC may have moved the file's chunks (and deleted the old pack) meanwhile.
        with ctx.sessions() as session:
            now = load_file(session, stored_file.sha256)
            session.rollback()
        if now is None:
            return None  # collected meanwhile
        try:
            actual = _digest(ctx, now)
        except PackNotFound:
            return f"is missing pack {exc.name} from the blob store"
    findings.files_hashed += 1
    findings.bytes_hashed += stored_file.size
    if actual != stored_file.sha256:
        return "is corrupt (its chunks do not reassemble to its sha256)"
    return None
