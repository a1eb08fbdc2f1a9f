"""Chunk-level savings for the pages: what a version shares with the one before it, and
what chunk dedup saves beyond storing each distinct file once.

A version's bytes are its distinct files' bytes. The share it has with its previous
version counts a file that version also holds, in full, and of a chunked file the bytes
of its segments that lie where the previous version's segments lie, in the same packs:
a chunk is stored once, so a chunk both versions use is one place in one pack, and GC
moves every segment of a pack it rewrites alike. (A chunk that two racing pushes both
stored counts as not shared: the figure errs low, never high.)

Two queries (``carton_files`` joined to ``blobs``, then ``blob_segments`` of the chunked
files) for all the versions of a page, whatever their number; a pair of cartons always
shares the same bytes, so each pair's figure is kept (``caches.version_shares``).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.db.queries import in_chunks
from registry.db.tables import Blob, BlobSegment, CartonFile
from registry.services.context import RegistryContext

Interval = tuple[int, int]


@dataclass(frozen=True)
class VersionShare:
    """``shared_bytes`` of a version's ``total_bytes`` are already in version ``previous``."""

    previous: int
    shared_bytes: int
    total_bytes: int

    @property
    def percent(self) -> float:
        return 100.0 * self.shared_bytes / self.total_bytes if self.total_bytes else 0.0


@dataclass
class _Layout:
    """A carton's distinct files (sha256 -> size), and where its chunked ones lie."""

    sizes: dict[str, int] = field(default_factory=dict)
    segments: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)

    def coverage(self) -> dict[int, list[Interval]]:
        """Per pack id, the byte ranges this carton's files use, sorted and merged."""
        ranges: dict[int, list[Interval]] = {}
        for segments in self.segments.values():
            for pack_id, start, end in segments:
                ranges.setdefault(pack_id, []).append((start, end))
        merged: dict[int, list[Interval]] = {}
        for pack_id, spans in ranges.items():
            out: list[Interval] = []
            for start, end in sorted(spans):
                if out and start <= out[-1][1]:
                    out[-1] = (out[-1][0], max(out[-1][1], end))
                else:
                    out.append((start, end))
            merged[pack_id] = out
        return merged


def _layouts(session: Session, manifests: Iterable[str]) -> dict[str, _Layout]:
    layouts = {m: _Layout() for m in manifests}
    chunked: set[str] = set()
    for batch in in_chunks(sorted(layouts)):
        for manifest, sha, size, is_chunked in session.execute(
            select(
                CartonFile.manifest_sha256, CartonFile.blob_sha256, CartonFile.size, Blob.chunked
            )
            .outerjoin(Blob, Blob.sha256 == CartonFile.blob_sha256)
            .where(CartonFile.manifest_sha256.in_(batch))
        ):
            layouts[manifest].sizes[sha] = int(size)
            if is_chunked:
                chunked.add(sha)
    segments: dict[str, list[tuple[int, int, int]]] = {}
    for batch in in_chunks(sorted(chunked)):
        for sha, pack_id, start, length in session.execute(
            select(
                BlobSegment.blob_sha256,
                BlobSegment.pack_id,
                BlobSegment.pack_offset,
                BlobSegment.length,
            ).where(BlobSegment.blob_sha256.in_(batch))
        ):
            segments.setdefault(sha, []).append((int(pack_id), int(start), int(start + length)))
    for layout in layouts.values():
        layout.segments = {sha: segments[sha] for sha in layout.sizes if sha in segments}
    return layouts


def _overlap(spans: list[Interval], start: int, end: int) -> int:
    """Bytes of ``[start, end)`` inside the sorted, disjoint ``spans``."""
    total = 0
    at = bisect.bisect_right(spans, (start, start)) - 1
    for lo, hi in spans[max(at, 0) :]:
        if lo >= end:
            break
        total += max(0, min(hi, end) - max(lo, start))
    return total


def _shared(previous: _Layout, current: _Layout) -> tuple[int, int]:
    """(bytes of ``current`` already in ``previous``, bytes of ``current``)."""
    coverage = previous.coverage()
    shared = total = 0
    for sha, size in current.sizes.items():
        total += size
        if sha in previous.sizes:
            shared += size
            continue
        for pack_id, start, end in current.segments.get(sha, ()):
            shared += _overlap(coverage.get(pack_id, []), start, end)
    return shared, total


def version_shares(
    ctx: RegistryContext, session: Session, versions: Iterable[Mapping[str, Any]]
) -> dict[int, VersionShare]:
    """Version number -> what it shares with the previous one, for one model's versions
    (``{"version": n, "manifest_sha256": ...}``, any order; the first has none)."""
    ordered = sorted((int(v["version"]), str(v["manifest_sha256"])) for v in versions)
    pairs = list(itertools.pairwise(ordered))
    cache = ctx.caches.version_shares
    known = {(p, c): cache.get((p, c)) for (_, p), (_, c) in pairs}
    missing = [pair for pair, value in known.items() if value is None]
    if missing:
        layouts = _layouts(session, {m for pair in missing for m in pair})
        for previous, current in missing:
            known[(previous, current)] = value = _shared(layouts[previous], layouts[current])
            cache.put((previous, current), value)
    shares: dict[int, VersionShare] = {}
    for (before, previous), (number, current) in pairs:
        shared = known[(previous, current)]
        assert shared is not None
        shares[number] = VersionShare(before, *shared)
    return shares


def dedup_levels(session: Session, totals: Mapping[str, Any]) -> dict[str, Any]:
    """What file dedup and chunk dedup each save, from the index totals (``stats``).

    ``distinct_file_bytes`` is what storing each distinct file whole would take; file
    dedup saves the logical bytes beyond it, chunk dedup what is stored below it.
    """
    distinct = int(session.scalar(select(func.coalesce(func.sum(Blob.size), 0))) or 0)
    chunk_saved = max(distinct - int(totals["stored_bytes"]), 0)
    return {
        "distinct_file_bytes": distinct,
        "file_saved_bytes": max(int(totals["logical_bytes"]) - distinct, 0),
        "chunk_saved_bytes": chunk_saved,
        "chunk_saved_percent": 100.0 * chunk_saved / distinct if distinct else 0.0,
    }
