"""Integrity of the chunk store: packs against their rows, chunks against their names.

``check_packs`` compares every live pack row with the store listing (missing,
wrong size) and names the chunked files those packs damage. With hashes it
reads each pack once, front to back, and checks every chunk's BLAKE3 against
the pack's chunk table; then it reassembles every chunked file and checks its
sha256, so a file is reported whatever broke it. Problems are re-checked
before they are reported, as ``fsck`` does for whole blobs.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from registry.blobstore.chunking import chunk_hash
from registry.carton.streams import CHUNK
from registry.db.tables import Blob, BlobSegment, Pack
from registry.services.chunkstore.layout import parse_pack_table
from registry.services.chunkstore.reader import iter_file, load_files
from registry.services.context import RegistryContext


@dataclass
class PackFindings:
    packs_missing: list[str] = field(default_factory=list)
    packs_wrong_size: list[str] = field(default_factory=list)
    corrupt_chunks: list[dict[str, Any]] = field(default_factory=list)  # pack, idx, hash
    orphan_packs: list[str] = field(default_factory=list)
    packs_checked: int = 0
    chunks_hashed: int = 0
    # Chunked files (sha256 -> why) that the above damage, or whose sha256 is wrong.
    files: dict[str, str] = field(default_factory=dict)
    bytes_hashed: int = 0
    files_hashed: int = 0


def _packs(ctx: RegistryContext) -> dict[str, tuple[int, int, bytes]]:
    """Live packs: name -> (id, size, chunk table)."""
    with ctx.sessions() as session:
        rows = session.execute(
            select(Pack.name, Pack.id, Pack.size, Pack.chunk_table).where(Pack.retired_at.is_(None))
        ).all()
        session.rollback()
    return {r.name: (r.id, int(r.size), bytes(r.chunk_table)) for r in rows}


def _files_using(ctx: RegistryContext, pack_id: int, chunks: set[int] | None) -> list[str]:
    """Chunked files with a segment in the pack (covering one of ``chunks`` when given)."""
    with ctx.sessions() as session:
        rows = session.execute(
            select(BlobSegment.blob_sha256, BlobSegment.first_chunk, BlobSegment.end_chunk).where(
                BlobSegment.pack_id == pack_id
            )
        ).all()
        session.rollback()
    return sorted(
        {sha for sha, first, end in rows if chunks is None or any(first <= i < end for i in chunks)}
    )


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


def check_packs(
    ctx: RegistryContext, verify_hashes: bool, sample: int | None, findings: PackFindings
) -> None:
    packs = _packs(ctx)
    stored = {p.name: p.size for p in ctx.blobs.iter_packs()}
    findings.packs_checked = len(packs)
    findings.orphan_packs = sorted(set(stored) - set(packs))
    for name, (pack_id, size, _) in sorted(packs.items()):
        actual = ctx.blobs.pack_size(name) if name not in stored else stored[name]
        if actual is None:
            findings.packs_missing.append(name)
            problem = f"is missing pack {name} from the blob store"
        elif actual != size:
            findings.packs_wrong_size.append(name)
            problem = f"has pack {name} of the wrong size in the blob store (expected {size})"
        else:
            continue
        for sha in _files_using(ctx, pack_id, None):
            findings.files.setdefault(sha, problem)
    if not verify_hashes:
        return

    damaged = set(findings.packs_missing) | set(findings.packs_wrong_size)
    to_verify = sorted(name for name in packs if name not in damaged)
    if sample is not None and sample < len(to_verify):
        to_verify = sorted(random.sample(to_verify, max(0, sample)))
    for name in to_verify:
        pack_id, _, table = packs[name]
        bad = _verify_pack(ctx, name, table, findings)
        if not bad:
            continue
        entries = parse_pack_table(table)
        findings.corrupt_chunks.extend(
            {"pack": name, "idx": i, "hash": entries[i][0]} for i in sorted(bad)
        )
        for sha in _files_using(ctx, pack_id, bad):
            findings.files.setdefault(sha, f"has corrupt chunks in pack {name}")

    with ctx.sessions() as session:
        chunked = sorted(session.scalars(select(Blob.sha256).where(Blob.chunked.is_(True))))
        session.rollback()
    todo = [sha for sha in chunked if sha not in findings.files]
    if sample is not None and sample < len(todo):
        todo = sorted(random.sample(todo, max(0, sample)))
    for batch_start in range(0, len(todo), 100):
        with ctx.sessions() as session:
            files = load_files(session, todo[batch_start : batch_start + 100])
            session.rollback()
        for sha, stored_file in files.items():
            h = hashlib.sha256()
            for data in iter_file(ctx.blobs, stored_file):
                h.update(data)
            findings.files_hashed += 1
            findings.bytes_hashed += stored_file.size
            if h.hexdigest() != sha:
                findings.files[sha] = "is corrupt (its chunks do not reassemble to its sha256)"
