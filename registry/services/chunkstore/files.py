"""One file's bytes into a push's pack session: ``FileWriter`` (see ``writer``)."""

from __future__ import annotations

import collections
import hashlib
from concurrent.futures import Future

from registry.carton.streams import crc32
from registry.chunking import Chunker, chunk_hash
from registry.services.chunkstore.layout import FileLayout, Segments
from registry.services.chunkstore.writer import PackSession

MiB = 1024 * 1024
LOOKUP_BATCH_BYTES = 16 * MiB
"""Chunk bytes per ``PackSession.place``: one index lookup (and one claim) per batch. A
batch's bytes are held until it is placed, while the next is cut: two batches at most.
Smaller batches cost time: 8 MiB ran 2.97-3.01 against 2.79-2.84 s a GiB with placing
overlapping cutting (alternated); before that, 8 MiB batches and 2 MiB hand-offs peaked a
pushing worker about 20 MiB lower (issue 27) but ran 143 against 170 MiB/s."""
HANDOFF_BYTES = 4 * MiB
"""Per hand-off to the hashing and chunking threads: one wake-up of each (the ``Chunker``
still joins 1 MiB at a time). Up to ``PIECES_IN_FLIGHT`` hand-offs and one being gathered
are held at once (both threads take the same pieces)."""
PIECES_IN_FLIGHT = 2

_Piece = bytes | memoryview
"""Bytes written: one chunk the sender cut (``write_chunk``), or bytes to cut here
(``write``); a writer takes only one kind (``_given``)."""


class FileWriter:
    """One file's bytes in, a ``FileLayout`` out (module doc).

    The caller's thread computes the CRC-32 (unless the caller knows it) as the bytes
    arrive; the session's hashing thread the sha256 and its chunking thread the cuts and
    names, both fed the same pieces of about ``HANDOFF_BYTES``; its placing thread places a
    batch at a time while the next is cut: hashlib, pyfastcdc, BLAKE3 and the database
    drivers release the GIL, so a push keeps both cores busy. A file below the chunking
    threshold is hashed whole on the caller's thread when it closes.

    Where the sha256 runs has been measured on three hosts (issue 27). On the caller's
    thread (which also reads a large body from its socket, ``registry.http.body_socket``,
    and decompresses zstd members) or on the chunking thread, the push waited for
    whichever thread had it on some host: the caller's won on an Intel Xeon (2.70 -> 2.43
    s a GiB), the chunking thread on an AMD EPYC with AVX-512 (2.63 -> 2.57 s). On an
    Intel Xeon with AVX-512 where sha256 runs at 1.1 GB/s (half the single-pass limit),
    its own thread pushed a fresh GiB in 2.24-2.33 s against 2.52-2.55 s on the chunking
    thread, with no more CPU (6 alternated rounds, twice); the caller's thread ran there
    in 2.16-2.26 s, but it is the one that lost on the AMD host, and it decompresses. Its
    own thread leaves no stage doing two of the three per-byte passes. Two naming threads
    beside the chunking one, a future per MiB of chunks, cost more in hand-offs than they
    saved once placing had its own thread.
    """

    def __init__(
        self, session: PackSession, *, crc: bool = True, collect_names: bool = False
    ) -> None:
        self._session = session
        # The names of the chunks placed, in order, when the caller must remember them.
        self.names: list[str] | None = [] if collect_names else None
        self._threshold = session.ctx.settings.chunk_min_file_bytes
        self._sha = hashlib.sha256()
        self._crc: int | None = 0 if crc else None
        self.size = 0
        # Pieces written: ``_small`` until the file proves larger than the threshold, then
        # ``_pending`` per hand-off.
        self._small: list[_Piece] | None = []
        self._chunker: Chunker | None = None
        self._given: bool | None = None  # cut by the sender (``write_chunk``), or here
        self._pending: list[_Piece] = []
        self._pending_bytes = 0
        self._inflight: collections.deque[Future[None]] = collections.deque()  # cutting
        self._hashing: collections.deque[Future[None]] = collections.deque()
        self._named: list[tuple[str, memoryview]] = []  # cut, not yet handed to the placer
        self._batch_bytes = 0
        self._placing: Future[None] | None = None  # this file's last batch handed to the placer
        self._segments = Segments()  # of the chunks placed so far, in file order
        self._new_chunk_bytes = 0

    def write(self, data: bytes) -> None:
        if data:
            self._accept(bytes(data), False)

    def write_chunk(self, chunk: bytes | memoryview) -> None:
        """The next whole chunk the sender cut (a cut upload, ``services.cut_upload``), as
        received: hashed and named as ``write``'s bytes are, not cut again (no FastCDC on
        the chunking thread), and not copied into larger pieces first."""
        if chunk:
            self._accept(chunk, True)

    def _accept(self, data: bytes | memoryview, given: bool) -> None:
        """``data`` queued for the chunking thread (its CRC-32 taken here): one chunk the
        sender cut (``given``), or bytes to cut there."""
        assert self._given in (None, given), "a writer takes write() or write_chunk(), not both"
        self._given = given
        if self._crc is not None:
            self._crc = crc32(data, self._crc)
        self.size += len(data)
        if self._small is not None:
            self._small.append(data)
            if self.size <= self._threshold:
                return
            self._pending, self._small = self._small, None
            self._pending_bytes = self.size
            if not given:
                self._chunker = Chunker(self._session.params)
        else:
            self._pending.append(data)
            self._pending_bytes += len(data)
        if self._pending_bytes >= HANDOFF_BYTES:
            self._hand_off()

    def _hand_off(self) -> None:
        pieces = self._pending
        self._pending, self._pending_bytes = [], 0
        for inflight in (self._inflight, self._hashing):
            while len(inflight) >= PIECES_IN_FLIGHT:
                inflight.popleft().result()
        cut = self._cut_given if self._given else self._cut
        self._hashing.append(self._session.hasher().submit(self._hash, pieces))
        self._inflight.append(self._session.worker().submit(cut, pieces))

    def _hash(self, pieces: list[_Piece]) -> None:
        """On the hashing thread: the file's sha256, the pieces in the order written."""
        for piece in pieces:
            self._sha.update(piece)

    def _cut(self, pieces: list[_Piece]) -> None:
        """On the chunking thread: the pieces joined there, once, and cut (``Chunker``)."""
        chunker = self._chunker
        assert chunker is not None
        for piece in pieces:
            self._take(chunker.feed(piece))

    def _cut_given(self, pieces: list[_Piece]) -> None:
        """On the chunking thread: the sender's chunks, each named as it is."""
        self._take([memoryview(piece) for piece in pieces])

    def _take(self, chunks: list[memoryview]) -> None:
        if chunks:
            self._named.extend((chunk_hash(chunk), chunk) for chunk in chunks)
            self._batch_bytes += sum(map(len, chunks))
        if self._batch_bytes >= LOOKUP_BATCH_BYTES:
            self._flush()

    def _flush(self) -> None:
        """On the chunking thread: the chunks cut so far go to the placing thread, once this
        file's batch before them is placed (a failure there raises here and stops the file;
        two batches are held at most: one placed, one cut)."""
        if not self._named:
            return
        batch, self._named, self._batch_bytes = self._named, [], 0
        if self._placing is not None:
            self._placing.result()
        self._placing = self._session.placer().submit(self._place, batch)

    def _place(self, batch: list[tuple[str, memoryview]]) -> None:
        """On the placing thread: one ``PackSession.place`` for a batch of named chunks."""
        if self.names is not None:
            self.names.extend(name for name, _ in batch)
        before = self._session.chunk_bytes_written
        for ref in self._session.place(batch):
            self._segments.add(ref)
        self._new_chunk_bytes += self._session.chunk_bytes_written - before

    def _finish_cutting(self) -> None:
        if self._chunker is not None:  # none when the sender cut the file
            self._take(self._chunker.finish())
        self._flush()

    def keep_cut(self) -> None:
        """Place every chunk cut so far, not the tail the chunker still carries: for an
        upload whose body stopped short, whose whole chunks are worth keeping (each is
        named by its own BLAKE3) though the file never arrived."""
        if self._small is not None:
            return  # below the chunking threshold: nothing was cut
        if self._pending:
            self._hand_off()
        self._inflight.append(self._session.worker().submit(self._flush))
        while self._inflight:
            self._inflight.popleft().result()
        if self._placing is not None:
            self._placing.result()

    def close(self, crc32: int | None = None) -> FileLayout:
        """The file's layout; its bytes are staged or placed (published by ``finish``).

        ``crc32``: the file's CRC-32 when the caller computed it (a zip member's).
        """
        return self.close_later(crc32).result()

    def close_later(self, crc32: int | None = None) -> Future[FileLayout]:
        """``close`` without waiting for the session's threads: the caller goes on reading
        the next file while this one's last chunks are cut, named and placed (a carton's
        members, each of which made the threads wait in turn at its end). The session's
        one chunking and one placing thread each run their tasks in order, so each file's
        layout is final before the next file's first chunk is placed, and
        ``PackSession.finish`` waits for all.
        """
        crc = crc32 if crc32 is not None else self._crc
        assert crc is not None, "a FileWriter made with crc=False needs close(crc32=...)"
        done: Future[FileLayout] = Future()
        if self._small is not None:
            whole = b"".join(self._small)
            sha256 = hashlib.sha256(whole).hexdigest()
            self._session.stage_whole(sha256, whole)
            done.set_result(FileLayout(sha256, self.size, crc, None))
            return done
        if self._pending:
            self._hand_off()
        inflight, self._inflight = list(self._inflight), collections.deque()
        hashing, self._hashing = list(self._hashing), collections.deque()

        def digest() -> str:  # on the hashing thread, after the file's last piece
            for piece in hashing:
                piece.result()  # done already (one thread, in order): its failure, if any
            return self._sha.hexdigest()

        digested = self._session.hasher().submit(digest)

        def cut_rest() -> None:  # on the chunking thread, after the file's last piece
            for piece in inflight:
                piece.result()  # done already (one thread, in order): its failure, if any
            self._finish_cutting()
            _chain(self._session.placer().submit(settle, digested.result()), done)

        def settle(sha256: str) -> None:  # on the placing thread, after the file's last batch
            if self._placing is not None:
                self._placing.result()
            segments = self._segments.result()
            done.set_result(FileLayout(sha256, self.size, crc, segments, self._new_chunk_bytes))

        _chain(self._session.worker().submit(cut_rest), done)
        return done


def _chain(step: Future[None], done: Future[FileLayout]) -> None:
    """``done`` fails when ``step`` fails or is cancelled (a discarded session's threads
    drop the tasks they have not started): whoever waits for ``done`` never hangs."""

    def failed(step: Future[None]) -> None:
        if step.cancelled():
            done.cancel()
        elif (exc := step.exception()) is not None and not done.done():
            done.set_exception(exc)

    step.add_done_callback(failed)
