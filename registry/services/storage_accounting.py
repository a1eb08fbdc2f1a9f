"""Per model storage on ``/stats``: bytes a model shares with others, and bytes only it
uses (what deleting it frees), counted in what the store holds.

An owner is a model; cartons that no version references (unnamed pushes) count as one
more owner, so bytes they also use are never called exclusive. A whole blob's bytes are
its size. A chunked file's bytes are the ranges of packs its segments use: two models'
files that share chunks share those bytes, not their whole sizes (a fine-tune and its
base), and a model's total counts each stored byte once. Whole blobs are summed by one
aggregate query; chunked files by one query of owners and one of segments, swept per
pack. The caller (``webviews.storage_stats``) runs this in the background and keeps it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import CTE, case, func, literal, select
from sqlalchemy.orm import Session

from registry.db.tables import Blob, BlobSegment, CartonFile, Model, Version

TOP = 20
UNNAMED = -1  # the owner of cartons no version references

Bytes = list[int]  # exclusive, shared, total


def _owned() -> CTE:
    """(owner, sha) of every blob a carton names: a CTE."""
    owner = func.coalesce(Version.model_id, literal(UNNAMED))
    return (
        select(owner.label("owner"), CartonFile.blob_sha256.label("sha"))
        .select_from(CartonFile)
        .outerjoin(Version, Version.manifest_sha256 == CartonFile.manifest_sha256)
        .distinct()
        .cte("owned")
    )


def _whole_blobs(session: Session) -> dict[int, Bytes]:
    """Per model, its whole (unchunked) blobs' bytes: one aggregate query."""
    owned = _owned()
    owners = select(owned.c.sha, func.count().label("n")).group_by(owned.c.sha).cte("owners")
    rows = session.execute(
        select(
            owned.c.owner,
            func.sum(case((owners.c.n == 1, Blob.size), else_=0)),
            func.sum(case((owners.c.n > 1, Blob.size), else_=0)),
            func.sum(Blob.size),
        )
        .select_from(owned)
        .join(owners, owners.c.sha == owned.c.sha)
        .join(Blob, Blob.sha256 == owned.c.sha)
        .where(owned.c.owner != UNNAMED, Blob.chunked.is_(False))
        .group_by(owned.c.owner)
    )
    return {int(o): [int(e or 0), int(s or 0), int(t or 0)] for o, e, s, t in rows}


def _chunked_files(session: Session) -> dict[int, Bytes]:
    """Per model, the pack bytes its chunked files use: owners, segments, a sweep per pack."""
    owned = _owned()
    owners: dict[str, set[int]] = {}
    for owner, sha in session.execute(
        select(owned.c.owner, owned.c.sha)
        .join(Blob, Blob.sha256 == owned.c.sha)
        .where(Blob.chunked.is_(True))
    ):
        owners.setdefault(sha, set()).add(int(owner))
    events: dict[int, list[tuple[int, int, int]]] = {}  # pack -> (offset, +1/-1, owner)
    for sha, pack_id, start, length in session.execute(
        select(
            BlobSegment.blob_sha256,
            BlobSegment.pack_id,
            BlobSegment.pack_offset,
            BlobSegment.length,
        )
    ):
        for owner in owners.get(sha, ()):
            events.setdefault(int(pack_id), []).extend(
                [(int(start), 1, owner), (int(start + length), -1, owner)]
            )
    out: dict[int, Bytes] = {}
    for pack_events in events.values():
        using: Counter[int] = Counter()
        at = 0
        for offset, step, owner in sorted(pack_events):
            span = offset - at
            present = [o for o, n in using.items() if n > 0]
            if span and present:
                for o in present:
                    totals = out.setdefault(o, [0, 0, 0])
                    totals[0 if len(present) == 1 else 1] += span
                    totals[2] += span
            using[owner] += step
            at = offset
    out.pop(UNNAMED, None)
    return out


def model_storage(session: Session, limit: int = TOP) -> dict[str, list[dict[str, Any]]]:
    """The top ``limit`` models by shared bytes and by exclusive bytes (module docstring)."""
    per_model = _whole_blobs(session)
    for model_id, (exclusive, shared, total) in _chunked_files(session).items():
        mine = per_model.setdefault(model_id, [0, 0, 0])
        mine[0] += exclusive
        mine[1] += shared
        mine[2] += total
    by_shared = sorted(per_model, key=lambda m: (-per_model[m][1], m))[:limit]
    by_exclusive = sorted(per_model, key=lambda m: (-per_model[m][0], m))[:limit]
    wanted = sorted(set(by_shared) | set(by_exclusive))
    names = dict(session.execute(select(Model.id, Model.name).where(Model.id.in_(wanted))).all())

    def item(model_id: int) -> dict[str, Any]:
        exclusive, shared, total = per_model[model_id]
        return {"name": names[model_id], "exclusive": exclusive, "shared": shared, "total": total}

    return {
        "top_sharing": [item(m) for m in by_shared if per_model[m][1] > 0 and m in names],
        "exclusive": [item(m) for m in by_exclusive if m in names],
    }
