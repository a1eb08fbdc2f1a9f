"""What stored files are made of, by chunk hash: for diffs and lineage, from the index only.

A chunked file is its segments (``blob_segments``: runs of consecutive chunks of one
pack, in file order); a pack's ``chunk_table`` names each of its chunks (BLAKE3 and
length, in pack order). Together they give every chunk of a file with its offset in
the file, without reading a byte of the file. Comparisons use the chunk hashes, never
where the chunks lie: GC's repacking moves chunks between packs, and a chunk two
racing pushes both stored is still the same chunk.

A whole (unchunked) blob has no chunk list: it is shared only as a whole file.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.db.queries import in_chunks
from registry.db.tables import Blob, BlobSegment, CartonFile, Pack
from registry.services.chunkstore.layout import parse_pack_table


@dataclass(frozen=True)
class FileChunks:
    """A stored file: ``chunks`` are (file offset, length, BLAKE3) in file order, or None
    for a whole blob."""

    sha256: str
    size: int
    chunks: tuple[tuple[int, int, str], ...] | None

    def hashes(self) -> set[str]:
        return {h for _, _, h in self.chunks or ()}

    @cached_property
    def _offsets(self) -> list[int]:
        return [offset for offset, _, _ in self.chunks or ()]

    def overlapping(self, start: int, end: int) -> list[tuple[int, str]]:
        """(offset relative to ``start``, hash) of the chunks covering ``[start, end)``."""
        chunks = self.chunks or ()
        at = max(bisect.bisect_right(self._offsets, start) - 1, 0)
        out: list[tuple[int, str]] = []
        for offset, length, digest in chunks[at:]:
            if offset >= end:
                break
            if offset + length > start:
                out.append((offset - start, digest))
        return out


class PackTables:
    """Pack chunk tables read once per computation (a 64 MiB pack's is about 30 KiB)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.tables: dict[int, list[tuple[str, int]]] = {}

    def load(self, pack_ids: Iterable[int]) -> None:
        wanted = sorted(set(pack_ids) - self.tables.keys())
        for batch in in_chunks(wanted, 64):
            for pack_id, table in self.session.execute(
                select(Pack.id, Pack.chunk_table).where(Pack.id.in_(batch))
            ):
                self.tables[int(pack_id)] = parse_pack_table(bytes(table))


def load_file_chunks(
    session: Session, hashes: Iterable[str], tables: PackTables | None = None
) -> dict[str, FileChunks]:
    """Every indexed file among ``hashes``, with its chunk list when it is chunked."""
    tables = tables or PackTables(session)
    wanted = sorted(set(hashes))
    facts: dict[str, tuple[int, bool]] = {}
    for batch in in_chunks(wanted):
        for sha, size, chunked in session.execute(
            select(Blob.sha256, Blob.size, Blob.chunked).where(Blob.sha256.in_(batch))
        ):
            facts[sha] = (int(size), bool(chunked))
    segments: dict[str, list[tuple[int, int, int, int]]] = {}
    chunked_files = sorted(sha for sha, (_, c) in facts.items() if c)
    for batch in in_chunks(chunked_files):
        for sha, pack_id, first, end, file_offset in session.execute(
            select(
                BlobSegment.blob_sha256,
                BlobSegment.pack_id,
                BlobSegment.first_chunk,
                BlobSegment.end_chunk,
                BlobSegment.file_offset,
            )
            .where(BlobSegment.blob_sha256.in_(batch))
            .order_by(BlobSegment.blob_sha256, BlobSegment.seq)
        ):
            segments.setdefault(sha, []).append(
                (int(pack_id), int(first), int(end), int(file_offset))
            )
    tables.load(p for runs in segments.values() for p, _, _, _ in runs)
    out: dict[str, FileChunks] = {}
    for sha, (size, is_chunked) in facts.items():
        if not is_chunked:
            out[sha] = FileChunks(sha, size, None)
            continue
        chunks: list[tuple[int, int, str]] = []
        for pack_id, first, end, offset in segments.get(sha, ()):
            for digest, length in tables.tables.get(pack_id, [])[first:end]:
                chunks.append((offset, length, digest))
                offset += length
        out[sha] = FileChunks(sha, size, tuple(chunks))
    return out


@dataclass
class CartonContent:
    """One carton's files by path, and its distinct files' contents."""

    manifest_sha256: str
    paths: dict[str, str]  # path -> sha256
    files: dict[str, FileChunks]  # sha256 -> what it is made of

    def chunk_hashes(self) -> set[str]:
        return {h for f in self.files.values() for h in f.hashes()}

    @property
    def distinct_bytes(self) -> int:
        return sum(f.size for f in self.files.values())


def load_contents(
    session: Session, manifests: Iterable[str], tables: PackTables | None = None
) -> dict[str, CartonContent]:
    """Each carton's paths and files (three queries whatever the number of cartons)."""
    tables = tables or PackTables(session)
    contents = {m: CartonContent(m, {}, {}) for m in manifests}
    for batch in in_chunks(sorted(contents)):
        for manifest, path, sha in session.execute(
            select(CartonFile.manifest_sha256, CartonFile.path, CartonFile.blob_sha256).where(
                CartonFile.manifest_sha256.in_(batch)
            )
        ):
            contents[manifest].paths[path] = sha
    files = load_file_chunks(
        session, {sha for c in contents.values() for sha in c.paths.values()}, tables
    )
    for content in contents.values():
        content.files = {sha: files[sha] for sha in content.paths.values() if sha in files}
    return contents


def shared_bytes(file: FileChunks, other_files: set[str], other_chunks: set[str]) -> int:
    """Bytes of ``file`` that another carton holds: all of it when it holds the same file,
    else its chunks whose hashes are among ``other_chunks``."""
    if file.sha256 in other_files:
        return file.size
    return sum(length for _, length, digest in file.chunks or () if digest in other_chunks)


def carton_shared_bytes(mine: CartonContent, other: CartonContent) -> int:
    """Bytes of ``mine``'s distinct files that ``other`` holds (``shared_bytes`` summed)."""
    other_files = set(other.files)
    other_chunks = other.chunk_hashes()
    return sum(shared_bytes(f, other_files, other_chunks) for f in mine.files.values())
