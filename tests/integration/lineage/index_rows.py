"""Chunk-index rows written directly (packs, chunks, blobs, segments, cartons): lineage
reads nothing else, so its figures can be checked on large or odd cartons in seconds,
and ``reference_parent`` is lineage's algorithm as it was before it streamed."""

from __future__ import annotations

import heapq
import random
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.db.queries import insert_ignore
from registry.db.tables import Blob, BlobSegment, Carton, CartonFile, Chunk, Pack
from registry.services import cartons, lineage
from registry.services.file_chunks import PackTables, carton_shared_bytes, load_contents

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def hexname(rng: random.Random) -> str:
    return rng.randbytes(32).hex()


class Index:
    def __init__(self, session: Session, rng: random.Random) -> None:
        self.session, self.rng = session, rng
        self.tables: dict[int, list[tuple[bytes, int]]] = {}

    def pack(self, entries: list[tuple[bytes, int]], index_chunks: bool = True) -> int:
        """A pack of (digest, length) entries; ``index_chunks``: the chunks it holds first
        become their index rows (later copies are the racing pushes' extra copies)."""
        row = Pack(
            name=uuid.UUID(int=self.rng.getrandbits(128)).hex,
            size=sum(n for _, n in entries),
            chunk_count=len(entries),
            chunk_table=b"".join(d + n.to_bytes(4, "big") for d, n in entries),
        )
        self.session.add(row)
        self.session.flush()
        self.tables[row.id] = entries
        if index_chunks:
            rows, offset = [], 0
            for idx, (d, n) in enumerate(entries):
                rows.append(
                    {"hash": d.hex(), "pack_id": row.id, "idx": idx, "offset": offset, "length": n}
                )
                offset += n
            insert_ignore(self.session, Chunk.__table__, rows)
        return row.id

    def chunked_file(self, segments: list[tuple[int, int, int]], size: int | None = None) -> str:
        """A file of ``segments`` (pack id, first chunk, end chunk); ``size`` defaults to
        its chunks' bytes."""
        sha, offset, rows = hexname(self.rng), 0, []
        for seq, (pack_id, first, end) in enumerate(segments):
            length = sum(n for _, n in self.tables[pack_id][first:end]) or 1
            rows.append(
                {
                    "blob_sha256": sha,
                    "seq": seq,
                    "pack_id": pack_id,
                    "first_chunk": first,
                    "end_chunk": end,
                    "file_offset": offset,
                    "pack_offset": 0,
                    "length": length,
                }
            )
            offset += length
        size = offset if size is None else size
        self.session.add(Blob(sha256=sha, size=size, crc32=0, chunked=True))
        self.session.flush()
        if rows:
            self.session.execute(BlobSegment.__table__.insert(), rows)
        return sha

    def whole_file(self, size: int) -> str:
        sha = hexname(self.rng)
        self.session.add(Blob(sha256=sha, size=size, crc32=0))
        self.session.flush()
        return sha

    def carton(self, files: dict[str, str], created_at: datetime) -> str:
        """A carton of path -> file sha256 (a file may be a hash no blob row has)."""
        manifest = hexname(self.rng)
        self.session.add(
            Carton(
                manifest_sha256=manifest,
                manifest=b"{}",
                carton_toml="",
                spec_version=1,
                file_count=len(files),
                total_bytes=0,
                created_at=created_at,
            )
        )
        self.session.flush()
        sizes = dict(
            self.session.execute(
                select(Blob.sha256, Blob.size).where(Blob.sha256.in_(set(files.values())))
            ).all()
        )
        rows = [
            {"manifest_sha256": manifest, "path": p, "blob_sha256": s, "size": sizes[s]}
            for p, s in files.items()
        ]
        if rows:
            self.session.execute(CartonFile.__table__.insert(), rows)
        return manifest


def reference_parent(session: Session, manifest_sha256: str) -> tuple[str | None, int, int]:
    """``lineage.compute_parent`` as it was before it streamed (whole chunk lists loaded):
    the sample, the bytes per hit and the exact scores from whole lists; the candidate
    queries, which did not change, are ``lineage._candidates`` itself."""
    me = cartons.get_carton_row(session, manifest_sha256)
    tables = PackTables(session)
    mine = load_contents(session, [manifest_sha256], tables)[manifest_sha256]
    files = {f.sha256: f.size for f in mine.files.values()}
    chunk_bytes = {d: n for f in mine.files.values() for _, n, d in f.chunks or ()}
    sample = heapq.nsmallest(lineage.SAMPLE_CHUNKS, chunk_bytes)
    ranked, created = lineage._candidates(session, me, files, sum(chunk_bytes.values()), sample)
    if not ranked:
        return None, 0, mine.distinct_bytes
    contents = load_contents(session, ranked, tables)
    exact = {m: carton_shared_bytes(mine, contents[m]) for m in ranked}
    best = min(ranked, key=lambda m: (-exact[m], created[m], m))
    if exact[best] == 0:
        return None, 0, mine.distinct_bytes
    return best, exact[best], mine.distinct_bytes


def random_digest(rng: random.Random) -> bytes:
    """A digest; one in four ends in NUL bytes, one in eight starts with 0x00 (a crowded
    first byte for the spool's partitions)."""
    d = bytearray(rng.randbytes(32))
    if rng.random() < 0.25:
        k = rng.randint(1, 3)
        d[-k:] = bytes(k)
    if rng.random() < 0.125:
        d[0] = 0
    return bytes(d)


def random_registry(index: Index, cartons_wanted: int) -> list[str]:
    """Cartons built from a shared pool of chunks and files: copies of chunks in several
    packs, repeated chunks inside a file, segments past a pack's end, whole files, empty
    files, a file at two paths,
    files shared between cartons, and creation times with ties. Oldest first."""
    rng = index.rng
    pool = [(random_digest(rng), rng.randint(1, 5000)) for _ in range(rng.randint(20, 900))]
    packs = []
    for _ in range(rng.randint(1, 6)):
        entries = [rng.choice(pool) for _ in range(rng.randint(1, 300))]
        packs.append(index.pack(entries, index_chunks=rng.random() < 0.8))

    def chunked() -> str:
        segments = []
        for _ in range(rng.randint(0, 5)):
            pack_id = rng.choice(packs)
            n = len(index.tables[pack_id])
            first = rng.randrange(n)
            segments.append((pack_id, first, rng.randint(first + 1, n + rng.choice((0, 0, 2)))))
        return index.chunked_file(segments, size=None if rng.random() < 0.9 else rng.randint(1, 9))

    shared = [
        chunked()
        if rng.random() < 0.7
        else index.whole_file(rng.choice((0, rng.randint(1, 10**6))))
        for _ in range(rng.randint(1, 12))
    ]
    made, when = [], T0
    for _c in range(cartons_wanted):
        files: dict[str, str] = {}
        for i in range(rng.randint(0, 8)):
            kind = rng.random()
            if kind < 0.45:
                files[f"f{i}"] = rng.choice(shared)
            elif kind < 0.85:
                files[f"f{i}"] = chunked()
            elif kind < 0.95:
                files[f"f{i}"] = index.whole_file(rng.randint(0, 10**6))
            elif files:
                files[f"f{i}"] = rng.choice(list(files.values()))  # one file at two paths
        if rng.random() < 0.7:
            when += timedelta(seconds=1)
        made.append(index.carton(files, when))
    return made
