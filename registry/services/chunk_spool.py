"""A carton's chunk records, streamed from the index and spooled by digest: lineage's
exact figures in memory bounded whatever the cartons' sizes.

A record is a pack-table entry (32-byte BLAKE3 digest, 4-byte big-endian length); a
carton's records are those of its distinct chunked files' segments, one per chunk
occurrence, read one segment at a time (``segment_entries``: the database cuts each
segment's entries out of its pack's table). ``ChunkSpool`` keeps them in memory up to
``SPOOL_BYTES``, then partitions them by their digest's first byte into one temp file
per byte value (a grace hash join's partitions: BLAKE3 spreads digests evenly). Reading
runs of byte values holding at most ``GROUP_RECORDS`` records each (``groups``) then
holds one run at a time, whatever the carton's size, until a single byte value holds
more than that: past ``256 * GROUP_RECORDS`` records (about 512 GiB of 64 KiB chunks)
a run grows at 1/256 of the carton's rate.

``SPOOL_BYTES`` holds a 1.8 GiB carton's records (of 64 KiB chunks): smaller cartons
never touch disk. Plain Python (a dict or set per group): numpy would add 14 MiB to every
worker process that pushes, for a step that takes a fraction of a second.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from sqlalchemy import Select, bindparam, func, select
from sqlalchemy.orm import Session

from registry.db.tables import Blob, BlobSegment, CartonFile, Pack
from registry.services.chunkstore.layout import TABLE_ENTRY as _RECORD

ENTRY = _RECORD.size
GROUP_RECORDS = 1 << 15  # records one group holds in memory (a dict of them: ~5 MiB)
SPOOL_BYTES = 1 << 20  # records held before spilling to the partition files (29k records)
READ_RECORDS = 1 << 13  # records read from a partition file at a time
SEGMENT_ROWS = 16  # segment rows fetched at a time (a row: up to a pack table, ~36 KiB)

Record = tuple[bytes, int]
"""A chunk's 32-byte digest and its length."""


@functools.cache
def _segments_query() -> Select[str, Any]:
    """Built once (building it costs more than running it for a small carton)."""
    files = select(CartonFile.blob_sha256).where(
        CartonFile.manifest_sha256 == bindparam("manifest")
    )
    entries = func.substr(
        Pack.chunk_table,
        BlobSegment.first_chunk * ENTRY + 1,
        (BlobSegment.end_chunk - BlobSegment.first_chunk) * ENTRY,
    )
    return (
        select(BlobSegment.blob_sha256, entries)
        .join(Pack, Pack.id == BlobSegment.pack_id)
        .join(Blob, Blob.sha256 == BlobSegment.blob_sha256)
        .where(Blob.chunked, BlobSegment.blob_sha256.in_(files))
    )


def segment_entries(session: Session, manifest_sha256: str) -> Iterator[tuple[str, bytes]]:
    """(file sha256, its pack-table entries) per segment of the carton's distinct chunked
    files, in no particular order, ``SEGMENT_ROWS`` rows at a time (a server-side cursor on
    Postgres). A segment past its pack table's end is cut short, as a slice would be."""
    query = _segments_query().execution_options(yield_per=SEGMENT_ROWS)
    for sha, raw in session.execute(query, {"manifest": manifest_sha256}):
        yield sha, bytes(raw or b"")


def lengths(entries: bytes) -> int:
    """The bytes the chunks of ``entries`` hold."""
    return sum(length for _, length in _RECORD.iter_unpack(entries))


class ChunkSpool:
    """Records partitioned by their digest's first byte (a context manager: leaving it
    removes the partition files)."""

    def __init__(self) -> None:
        self.counts = [0] * 256
        self._pending = bytearray()
        self._dir: Path | None = None

    def __enter__(self) -> ChunkSpool:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._pending = bytearray()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    @property
    def spilled(self) -> bool:
        return self._dir is not None

    def add(self, entries: bytes) -> None:
        if len(entries) % ENTRY:
            raise ValueError(f"pack-table entries come in {ENTRY} bytes, not {len(entries)}")
        counts = self.counts
        for first in entries[::ENTRY]:
            counts[first] += 1
        self._pending += entries
        if len(self._pending) >= SPOOL_BYTES:
            self._spill()

    def _spill(self) -> None:
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="carton-lineage-"))
        parts: dict[int, bytearray] = {}
        pending = self._pending
        for at in range(0, len(pending), ENTRY):
            part = parts.get(pending[at])
            if part is None:
                part = parts[pending[at]] = bytearray()
            part += pending[at : at + ENTRY]
        for byte, part in parts.items():
            with open(self._dir / f"{byte:02x}", "ab") as out:
                out.write(part)
        self._pending = bytearray()

    def groups(self, limit: int | None = None) -> Iterator[tuple[int, int]]:
        """Byte ranges ``[lo, hi)`` covering 0-255, each holding at most ``limit`` records
        (``GROUP_RECORDS``) unless one byte value alone holds more."""
        limit = GROUP_RECORDS if limit is None else limit
        lo, held = 0, 0
        for byte in range(256):
            count = self.counts[byte]
            if byte > lo and held + count > limit:
                yield lo, byte
                lo, held = byte, 0
            held += count
        yield lo, 256

    def read(self, lo: int, hi: int) -> Iterator[Record]:
        """The records whose digest's first byte is in ``[lo, hi)``."""
        if self._dir is not None:
            for byte in range(lo, hi):
                path = self._dir / f"{byte:02x}"
                if not path.exists():
                    continue
                with open(path, "rb") as f:
                    while block := f.read(READ_RECORDS * ENTRY):
                        yield from _RECORD.iter_unpack(block)
        if self._pending:
            for record in _RECORD.iter_unpack(self._pending):
                if lo <= record[0][0] < hi:
                    yield record

    def distinct(self, sample_size: int) -> tuple[int, list[str]]:
        """(bytes of the distinct chunks, hex names of the ``sample_size`` smallest digests)."""
        total, sample = 0, list[str]()
        for lo, hi in self.groups():
            first: dict[bytes, int] = {}
            for digest, length in self.read(lo, hi):
                first.setdefault(digest, length)  # the first occurrence's length
            total += sum(first.values())
            if len(sample) < sample_size:  # groups come in digest order
                sample += [d.hex() for d in sorted(first)[: sample_size - len(sample)]]
        return total, sample

    def bytes_in(self, other: ChunkSpool) -> int:
        """Bytes of this spool's records whose digest ``other`` holds (each occurrence)."""
        total = 0
        for lo, hi in other.groups():
            held = {digest for digest, _ in other.read(lo, hi)}
            if held:
                total += sum(n for digest, n in self.read(lo, hi) if digest in held)
        return total
