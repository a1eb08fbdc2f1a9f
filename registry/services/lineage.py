"""Lineage: each carton's closest stored ancestor by shared bytes, and its derivatives.

The parent of carton X is the carton stored before X that holds the most of X's bytes
(ties: the older), computed from the chunk index when X is pushed, without reading a
byte of any file. Bytes held: a file both hold counts whole, a chunked file counts
its chunks (by BLAKE3 hash) that the other carton's files contain (as
``file_chunks.carton_shared_bytes`` counts them for cartons loaded whole; the tests
compare the two). ``share`` is that over X's
distinct files' bytes.

Method (bounded, whatever the size of the registry):

1. Candidates, from two indexed queries restricted to cartons older than X:
   cartons holding one of X's ``WHOLE_FILES`` largest files (``carton_files`` by blob
   hash), scored by those files' bytes; and cartons holding one of ``SAMPLE_CHUNKS``
   chunks of X, chosen as the chunks with the smallest hashes (a min-hash sample, so
   two similar files sample the same chunks), found through ``chunks`` (hash -> pack
   and index) and the ``blob_segments`` covering that index, scored by hits times
   X's chunked bytes per sampled chunk.
2. The ``CANDIDATES`` best scored candidates are then scored exactly, by chunk
   hashes, and the best one (ties: the older) is the parent.

Memory is bounded whatever the cartons' sizes: chunk lists are never loaded whole.
X's chunk records are streamed from the index into a ``chunk_spool.ChunkSpool``
(partitioned by digest, on disk past 1.8 GiB of chunks), which gives the sample and
X's distinct chunk bytes a partition at a time; each candidate's records are spooled
in turn, joined with X's a partition at a time, and dropped before the next. What
remains per X's distinct file is its size and its chunks' bytes (two dict entries).

A carton sharing only chunks outside the sample and outside its largest files can be
missed (only when it shares little: a carton sharing a fraction ``f`` of X's chunks
has on average ``f * SAMPLE_CHUNKS`` hits). Two pushes racing may not see each other.

Rows are written after the push's own transaction, so lineage never slows or fails a
push's indexing; a carton without a row (pushed before this existed, or whose parent
was deleted: the foreign key's cascade removes the row) is computed again when its
lineage is read, and deletes recompute the children of the cartons they remove.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from registry.db.queries import in_chunks, insert_ignore
from registry.db.tables import (
    Blob,
    BlobSegment,
    Carton,
    CartonFile,
    CartonLineage,
    Chunk,
    Model,
    Version,
    utcnow,
)
from registry.services import cartons, chunk_spool
from registry.services.access import (
    carton_readable,
    hidden_namespaces,
    readable_carton_condition,
)
from registry.services.chunk_spool import ChunkSpool, segment_entries
from registry.services.chunkstore.index import segment_holds_chunk
from registry.services.context import RegistryContext

log = logging.getLogger("registry.lineage")

SAMPLE_CHUNKS = 256
WHOLE_FILES = 64
CANDIDATES = 8
CHILDREN_SHOWN = 500


def _older_than(carton: Carton) -> Any:
    return or_(
        Carton.created_at < carton.created_at,
        and_(
            Carton.created_at == carton.created_at,
            Carton.manifest_sha256 < carton.manifest_sha256,
        ),
    )


def _my_files(session: Session, manifest_sha256: str) -> dict[str, int]:
    """The carton's distinct indexed files: sha256 -> size."""
    return {
        sha: int(size)
        for sha, size in session.execute(
            select(Blob.sha256, Blob.size)
            .where(
                Blob.sha256.in_(
                    select(CartonFile.blob_sha256).where(
                        CartonFile.manifest_sha256 == manifest_sha256
                    )
                )
            )
            .order_by(Blob.sha256)
        )
    }


def _spool(session: Session, manifest_sha256: str, spool: ChunkSpool) -> dict[str, int]:
    """Spool the carton's chunk records; the bytes each chunked file's chunks hold."""
    held: dict[str, int] = {}
    for sha, entries in segment_entries(session, manifest_sha256):
        spool.add(entries)
        held[sha] = held.get(sha, 0) + chunk_spool.lengths(entries)
    return held


def _whole_files_shared(
    session: Session, ranked: list[str], files: dict[str, int], chunked_bytes: dict[str, int]
) -> dict[str, int]:
    """Per candidate: for each of the carton's ``files`` it holds too, that file's size
    less its chunks' bytes (one query for all candidates)."""
    out = dict.fromkeys(ranked, 0)
    for manifest, sha in session.execute(
        select(CartonFile.manifest_sha256, CartonFile.blob_sha256)
        .where(CartonFile.manifest_sha256.in_(ranked))
        .distinct()
    ):
        if sha in files:
            out[manifest] += files[sha] - chunked_bytes.get(sha, 0)
    return out


def _chunks_shared(session: Session, candidate: str, mine: ChunkSpool) -> int:
    """Bytes of the carton's chunks (``mine``: every occurrence) whose hash one of
    ``candidate``'s files contains; ``candidate``'s records are dropped on return."""
    with ChunkSpool() as theirs:
        for _, entries in segment_entries(session, candidate):
            theirs.add(entries)
        return mine.bytes_in(theirs)


def compute_parent(session: Session, manifest_sha256: str) -> tuple[str | None, int, int]:
    """(parent manifest or None, bytes shared with it, the carton's distinct bytes).

    Chunk lists are streamed and spooled (``chunk_spool``), one carton at a time: the
    memory held per chunk is none, per distinct file a dict entry or two."""
    me = cartons.get_carton_row(session, manifest_sha256)
    files = _my_files(session, manifest_sha256)
    distinct_bytes = sum(files.values())
    with ChunkSpool() as mine:
        chunked_bytes = _spool(session, manifest_sha256, mine)
        chunks_total, sample = mine.distinct(SAMPLE_CHUNKS)
        ranked, created = _candidates(session, me, files, chunks_total, sample)
        if not ranked:
            return None, 0, distinct_bytes
        # ``carton_shared_bytes``: a file the candidate holds counts whole, any other
        # file counts those of its chunks that the candidate's files contain. That is
        # every chunk of the carton the candidate contains (a shared file's chunks are
        # all there: the same blob, the same segments), plus each shared file's size
        # less its chunks' bytes.
        exact = _whole_files_shared(session, ranked, files, chunked_bytes)
        for m in ranked:  # one candidate's records at a time
            exact[m] += _chunks_shared(session, m, mine)
    best = min(ranked, key=lambda m: (-exact[m], created[m], m))
    if exact[best] == 0:
        return None, 0, distinct_bytes
    return best, exact[best], distinct_bytes


def _candidates(
    session: Session, me: Carton, files: dict[str, int], chunks_total: int, sample: list[str]
) -> tuple[list[str], dict[str, datetime]]:
    """The ``CANDIDATES`` best scored older cartons, best first, and when each was made."""
    older = _older_than(me)
    scores: dict[str, float] = {}
    created: dict[str, datetime] = {}

    sizes = {sha: size for sha, size in files.items() if size > 0}
    largest = heapq.nlargest(WHOLE_FILES, sizes, key=lambda sha: (sizes[sha], sha))
    if largest:
        for manifest, sha, when in session.execute(
            select(CartonFile.manifest_sha256, CartonFile.blob_sha256, Carton.created_at)
            .join(Carton, Carton.manifest_sha256 == CartonFile.manifest_sha256)
            .where(CartonFile.blob_sha256.in_(largest), older)
            .distinct()
        ):
            scores[manifest] = scores.get(manifest, 0.0) + sizes[sha]
            created[manifest] = when

    if sample:
        per_hit = chunks_total / len(sample)
        for manifest, _digest, when in session.execute(
            select(CartonFile.manifest_sha256, Chunk.hash, Carton.created_at)
            .select_from(Chunk)
            .join(BlobSegment, segment_holds_chunk())
            .join(CartonFile, CartonFile.blob_sha256 == BlobSegment.blob_sha256)
            .join(Carton, Carton.manifest_sha256 == CartonFile.manifest_sha256)
            .where(Chunk.hash.in_(sample), older)
            .distinct()
        ):
            scores[manifest] = scores.get(manifest, 0.0) + per_hit
            created[manifest] = when

    scores.pop(me.manifest_sha256, None)
    ranked = sorted(scores, key=lambda m: (-scores[m], created[m], m))[:CANDIDATES]
    return ranked, created


def without_lineage(session: Session, manifests: Iterable[str]) -> list[str]:
    """The stored cartons among ``manifests`` that have no lineage row (one query each 500)."""
    wanted = sorted(set(manifests))
    found: set[str] = set()
    stored: set[str] = set()
    for batch in in_chunks(wanted):
        for manifest, has_row in session.execute(
            select(Carton.manifest_sha256, CartonLineage.manifest_sha256)
            .outerjoin(CartonLineage, CartonLineage.manifest_sha256 == Carton.manifest_sha256)
            .where(Carton.manifest_sha256.in_(batch))
        ):
            stored.add(manifest)
            if has_row is not None:
                found.add(manifest)
    return sorted(stored - found)


def record(ctx: RegistryContext, manifests: Iterable[str]) -> None:
    """Compute and store the lineage of each carton among ``manifests`` that has none,
    oldest first (a parent's own lineage does not matter, but the order is stable)."""
    with ctx.sessions() as session:
        pending = without_lineage(session, manifests)
    for manifest in pending:
        with ctx.transaction() as session:
            if session.get(Carton, manifest) is None:  # deleted meanwhile
                continue
            parent, shared, total = compute_parent(session, manifest)
            insert_ignore(
                session,
                CartonLineage.__table__,
                [
                    {
                        "manifest_sha256": manifest,
                        "parent_sha256": parent,
                        "bytes_shared": shared,
                        "bytes_total": total,
                        "computed_at": utcnow(),
                    }
                ],
            )


def record_after_push(ctx: RegistryContext, manifest_sha256: str) -> None:
    """``record`` for a pushed carton; a failure is logged, never the push's failure."""
    try:
        record(ctx, [manifest_sha256])
    except Exception:
        log.warning(
            "lineage of %s not recorded (computed when read)", manifest_sha256, exc_info=True
        )


def children_of(session: Session, manifests: Iterable[str]) -> list[str]:
    """The cartons whose recorded parent is one of ``manifests``."""
    out: list[str] = []
    for batch in in_chunks(sorted(set(manifests))):
        out.extend(
            session.scalars(
                select(CartonLineage.manifest_sha256).where(CartonLineage.parent_sha256.in_(batch))
            )
        )
    return out


def _names(session: Session, manifests: Iterable[str]) -> dict[str, tuple[str | None, int | None]]:
    """Manifest -> (model name, version) of its first version, else carton.toml's name.

    Only cartons the caller may read are named (``registry.services.access``): one it
    may not read is left out, as if it were not stored."""
    hidden = hidden_namespaces(session)
    wanted = sorted(m for m in set(manifests) if carton_readable(session, m, hidden))
    out: dict[str, tuple[str | None, int | None]] = {}
    for batch in in_chunks(wanted):
        for manifest, name in session.execute(
            select(Carton.manifest_sha256, Carton.model_name).where(
                Carton.manifest_sha256.in_(batch)
            )
        ):
            out[manifest] = (name, None)
        for manifest, name, version in session.execute(
            select(Version.manifest_sha256, Model.name, Version.version)
            .join(Model, Model.id == Version.model_id)
            .where(Version.manifest_sha256.in_(batch), Model.namespace.not_in(sorted(hidden)))
            .order_by(Version.id.desc())  # the first version written last wins
        ):
            out[manifest] = (name, version)
    return out


def _entry(
    manifest: str, names: dict[str, tuple[str | None, int | None]], shared: int, total: int
) -> dict[str, Any]:
    name, version = names.get(manifest, (None, None))
    return {
        "manifest_sha256": manifest,
        "model_name": name,
        "version": version,
        "bytes_shared": shared,
        "share": shared / total if total else 0.0,
    }


def lineage_of(session: Session, manifest_sha256: str) -> dict[str, Any]:
    """The recorded parent and children of a carton whose lineage row exists."""
    row = session.get(CartonLineage, manifest_sha256)
    query = (
        select(CartonLineage.manifest_sha256, CartonLineage.bytes_shared, CartonLineage.bytes_total)
        .join(Carton, Carton.manifest_sha256 == CartonLineage.manifest_sha256)
        .where(CartonLineage.parent_sha256 == manifest_sha256)
    )
    hidden = hidden_namespaces(session)
    if hidden:  # filtered before the limit: the truncation flag counts only readable children
        query = query.where(readable_carton_condition(hidden, CartonLineage.manifest_sha256))
    children = session.execute(
        query.order_by(Carton.created_at, Carton.manifest_sha256).limit(CHILDREN_SHOWN + 1)
    ).all()
    parent = row.parent_sha256 if row is not None else None
    names = _names(session, [c.manifest_sha256 for c in children] + ([parent] if parent else []))
    return {
        "manifest_sha256": manifest_sha256,
        "parent": _entry(parent, names, row.bytes_shared, row.bytes_total)
        if row is not None and parent is not None and parent in names
        else None,
        "children": [
            _entry(c.manifest_sha256, names, c.bytes_shared, c.bytes_total)
            for c in children[:CHILDREN_SHOWN]
            if c.manifest_sha256 in names
        ],
        "children_truncated": len(children) > CHILDREN_SHOWN,
    }


def get_lineage_by_hash(ctx: RegistryContext, ref: str) -> dict[str, Any]:
    """The lineage of the carton a manifest hash, ``sha256:<hash>`` or a unique prefix names,
    computed now if it has none."""
    with ctx.sessions() as session:
        manifest = cartons.find_carton_row(session, ref).manifest_sha256
    record(ctx, [manifest])
    with ctx.sessions() as session:
        return lineage_of(session, manifest)


def parents_of(session: Session, manifests: Iterable[str]) -> dict[str, dict[str, Any] | None]:
    """Each carton's recorded parent entry (None: no parent or not computed): two queries."""
    rows: dict[str, tuple[str | None, int, int]] = {}
    for batch in in_chunks(sorted(set(manifests))):
        for manifest, parent, shared, total in session.execute(
            select(
                CartonLineage.manifest_sha256,
                CartonLineage.parent_sha256,
                CartonLineage.bytes_shared,
                CartonLineage.bytes_total,
            ).where(CartonLineage.manifest_sha256.in_(batch))
        ):
            rows[manifest] = (parent, int(shared), int(total))
    names = _names(session, [p for p, _, _ in rows.values() if p])
    return {
        m: _entry(parent, names, shared, total) if parent and parent in names else None
        for m, (parent, shared, total) in rows.items()
    }
