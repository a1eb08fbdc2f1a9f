"""What a written file is made of: chunk references, segments, and pack chunk tables."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

_TABLE_ENTRY = struct.Struct(">32sI")


@dataclass(frozen=True)
class ChunkRef:
    """Where one chunk of a file is read from."""

    pack: str
    idx: int
    offset: int
    length: int


@dataclass(frozen=True)
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
    return _TABLE_ENTRY.pack(bytes.fromhex(digest_hex), length)


def parse_pack_table(table: bytes) -> list[tuple[str, int]]:
    """(BLAKE3 hex, length) of every chunk of a pack, in pack order."""
    return [(d.hex(), n) for d, n in _TABLE_ENTRY.iter_unpack(table)]


def segments_of(refs: Iterable[ChunkRef]) -> list[Segment]:
    """Merge chunk references into runs of consecutive chunks of one pack."""
    segments: list[Segment] = []
    file_offset = 0
    run: list[ChunkRef] = []

    def close_run() -> None:
        if run:
            length = sum(r.length for r in run)
            segments.append(
                Segment(
                    run[0].pack,
                    run[0].idx,
                    run[-1].idx + 1,
                    file_offset - length,
                    run[0].offset,
                    length,
                )
            )
            run.clear()

    for ref in refs:
        if run and not (
            ref.pack == run[-1].pack
            and ref.idx == run[-1].idx + 1
            and ref.offset == run[-1].offset + run[-1].length
        ):
            close_run()
        run.append(ref)
        file_offset += ref.length
    close_run()
    return segments
