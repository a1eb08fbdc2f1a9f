"""What a written file is made of: chunk references, segments, and pack chunk tables."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

TABLE_ENTRY = struct.Struct(">32sI")  # a pack chunk table entry: BLAKE3 digest, length


@dataclass(frozen=True, slots=True)
class ChunkRef:
    """Where one chunk of a file is read from (slots: a push holds one per chunk it
    writes, about 12,000 per GiB)."""

    pack: str
    idx: int
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class Segment:
    """Consecutive chunks ``[first_chunk, end_chunk)`` of one pack, at ``file_offset``."""

    pack: str
    first_chunk: int
    end_chunk: int
    file_offset: int
    pack_offset: int
    length: int


@dataclass
class FileLayout:
    """What a written file is: its identity, and (when chunked) its segments."""

    sha256: str
    size: int
    crc32: int
    segments: list[Segment] | None  # None: stored as a whole blob
    new_chunk_bytes: int = 0  # bytes of chunks this file added to packs (after dedup)

    @property
    def chunked(self) -> bool:
        return self.segments is not None


def pack_table_entry(digest_hex: str, length: int) -> bytes:
    return TABLE_ENTRY.pack(bytes.fromhex(digest_hex), length)


def parse_pack_table(table: bytes) -> list[tuple[str, int]]:
    """(BLAKE3 hex, length) of every chunk of a pack, in pack order."""
    return [(d.hex(), n) for d, n in TABLE_ENTRY.iter_unpack(table)]


class Segments:
    """Chunk references merged into runs of consecutive chunks of one pack as they come:
    a file being written holds one ``Segment`` per run, not one reference per chunk."""

    def __init__(self) -> None:
        self._done: list[Segment] = []
        self._first: ChunkRef | None = None
        self._last: ChunkRef | None = None
        self._run_length = 0
        self._file_offset = 0  # where the current run ends in the file

    def add(self, ref: ChunkRef) -> None:
        last = self._last
        if last is not None and not (
            ref.pack == last.pack
            and ref.idx == last.idx + 1
            and ref.offset == last.offset + last.length
        ):
            self._close_run()
        if self._first is None:
            self._first = ref
        self._last = ref
        self._run_length += ref.length
        self._file_offset += ref.length

    def _close_run(self) -> None:
        first, last = self._first, self._last
        if first is not None and last is not None:
            self._done.append(
                Segment(
                    first.pack,
                    first.idx,
                    last.idx + 1,
                    self._file_offset - self._run_length,
                    first.offset,
                    self._run_length,
                )
            )
        self._first = self._last = None
        self._run_length = 0

    def result(self) -> list[Segment]:
        """Every segment, the last run closed."""
        self._close_run()
        return self._done


def segments_of(refs: Iterable[ChunkRef]) -> list[Segment]:
    """Merge chunk references into runs of consecutive chunks of one pack."""
    segments = Segments()
    for ref in refs:
        segments.add(ref)
    return segments.result()
