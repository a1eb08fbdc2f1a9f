"""The bytes of a local carton's members, as a push reads them: in place when Stored, streamed
when compressed.

A Stored member is a range of the zip file: the file is mapped once (read-only) and
the member read as a slice of the map, so hashing and cutting it copy nothing, and
several threads may read at once; a whole upload, which copies every byte anyway,
reads it from the file (``pieces``). Its zip CRC-32 is not checked on those paths: the
sha256 against MANIFEST, which every byte read this way goes through, is the stronger
check. A compressed member is read through ``CartonArchive.open_member`` (which checks
its CRC-32 as it decompresses).
"""

from __future__ import annotations

import hashlib
import mmap
from collections.abc import Iterable, Iterator
from pathlib import Path

from registry.carton.digests import mismatch_message
from registry.carton.streams import pread_range
from registry.carton.zipread import CartonArchive
from registry.client.chunks import READ_BYTES, Source, read_pieces
from registry.client.transport import ClientError, Progress


class LocalCarton:
    """A carton file opened for a push: its members' bytes, and their hashes checked."""

    def __init__(self, archive: CartonArchive, path: Path) -> None:
        self.archive = archive
        self.path = path
        self._map: mmap.mmap | None = None

    def close(self) -> None:
        """Forget the map; it is unmapped once no slice of it is left (chunks in flight)."""
        self._map = None

    def source(self, member: str) -> Source:
        """The member's bytes: a slice of the mapped file, or a stream of pieces."""
        span = self._in_file(member)
        if span is None:
            return self._stream(member)
        if self._map is None:
            with self.path.open("rb") as f:
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        offset, size = span
        return memoryview(self._map)[offset : offset + size]

    def in_place(self, member: str) -> bool:
        """Whether ``source`` gives the member as a slice of the mapped file."""
        return self._in_file(member) is not None

    def pieces(self, member: str) -> Iterator[bytes]:
        """The member's bytes in ``READ_BYTES`` pieces, to send: a Stored member read from
        the file (a copy by the kernel per piece) rather than copied out of the map (which
        faults every page in: 0.4 CPU-second a GiB on the sending threads, on the 2 cores
        the registry shares in a local push)."""
        span = self._in_file(member)
        if span is None:
            yield from self._stream(member)
            return
        offset, size = span
        short = ClientError(f"{self.path}: {member} ends early (the file was changed)")
        with self.path.open("rb", buffering=0) as f:
            yield from pread_range(f.fileno(), offset, offset + size, READ_BYTES, short)

    def _in_file(self, member: str) -> tuple[int, int] | None:
        """(offset, size) of a Stored, non-empty member's bytes in the file; else None (read
        it through the archive)."""
        span = self.archive.stored_span(member)
        return None if span is None or span[1] == 0 else span

    def _stream(self, member: str) -> Iterator[bytes]:
        with self.archive.open_member(member) as reader:
            yield from read_pieces(reader)

    def verify(self, member: str, sha256: str, progress: Progress | None = None) -> None:
        """ClientError, naming the carton and the member, unless it hashes to ``sha256``."""
        source = self.source(member)
        pieces: Iterable[bytes | memoryview]
        if isinstance(source, memoryview):
            view = source
            pieces = (view[at : at + READ_BYTES] for at in range(0, len(view), READ_BYTES))
        else:
            pieces = source
        h = hashlib.sha256()
        for piece in pieces:
            h.update(piece)
            if progress is not None:
                progress(len(piece))
        if h.hexdigest() != sha256:
            raise ClientError(f"{self.path}: {mismatch_message(member, h.hexdigest(), sha256)}")
