"""Rows for written files: ``blobs`` and, for chunked ones, ``blob_segments``.

Called in a push's indexing transaction, after ``PackSession.pack_ids`` gave
the pack ids. A file whose row exists keeps it (the first layout wins, as the
first copy of a blob does), unless the caller names it in ``replace``: a row
whose bytes were lost (found by fsck or a failed read) takes the new layout.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import ColumnElement, and_, delete, select, update
from sqlalchemy.orm import Session

from registry.db.queries import in_chunks, insert_ignore_returning
from registry.db.tables import Blob, BlobSegment, Chunk
from registry.services.chunkstore.layout import FileLayout
from registry.services.chunkstore.wholedamage import forget_blob_damage


def segment_holds_chunk() -> ColumnElement[bool]:
    """Join condition: the ``blob_segments`` row covers the ``chunks`` row (same pack, its
    index inside the segment's chunk range): which files a chunk is part of."""
    return and_(
        BlobSegment.pack_id == Chunk.pack_id,
        BlobSegment.first_chunk <= Chunk.idx,
        BlobSegment.end_chunk > Chunk.idx,
    )


def _segment_rows(layout: FileLayout, pack_ids: dict[str, int]) -> list[dict[str, object]]:
    assert layout.segments is not None
    return [
        {
            "blob_sha256": layout.sha256,
            "seq": seq,
            "pack_id": pack_ids[s.pack],
            "first_chunk": s.first_chunk,
            "end_chunk": s.end_chunk,
            "file_offset": s.file_offset,
            "pack_offset": s.pack_offset,
            "length": s.length,
        }
        for seq, s in enumerate(layout.segments)
    ]


def record_files(
    session: Session,
    layouts: Iterable[FileLayout],
    pack_ids: dict[str, int],
    replace: Iterable[str] = (),
) -> set[str]:
    """Insert rows for files not indexed yet (and those in ``replace``); the hashes inserted."""
    by_sha = {layout.sha256: layout for layout in layouts}
    replacing = set(replace) & by_sha.keys()
    for batch in in_chunks(sorted(replacing)):
        session.execute(delete(BlobSegment).where(BlobSegment.blob_sha256.in_(batch)))
    for sha in sorted(replacing):
        layout = by_sha[sha]
        session.execute(
            update(Blob)
            .where(Blob.sha256 == sha)
            .values(size=layout.size, crc32=layout.crc32, chunked=layout.chunked)
        )
    # A file whose damaged whole object is replaced by chunks: the object is no longer its.
    forget_blob_damage(session, [sha for sha in replacing if by_sha[sha].chunked])
    existing: set[str] = set()
    for batch in in_chunks(sorted(by_sha)):
        existing.update(session.scalars(select(Blob.sha256).where(Blob.sha256.in_(batch))))
    candidates = [by_sha[sha] for sha in sorted(by_sha) if sha not in existing]
    # A concurrent push may insert the same file meanwhile: its row (and segments) win.
    inserted = insert_ignore_returning(
        session,
        Blob.__table__,
        [
            {"sha256": f.sha256, "size": f.size, "crc32": f.crc32, "chunked": f.chunked}
            for f in candidates
        ],
        Blob.__table__.c.sha256,
    )
    new = [by_sha[sha] for sha in sorted(inserted)]
    segments = [
        row
        for f in [*new, *(by_sha[sha] for sha in sorted(replacing))]
        if f.segments is not None
        for row in _segment_rows(f, pack_ids)
    ]
    if segments:
        session.execute(BlobSegment.__table__.insert(), segments)
    return {f.sha256 for f in new}
