"""Pushing large files as chunks (docs/chunk-transfer.md): only the chunks the registry lacks
travel, so a fine-tune sends its changed regions and an interrupted push, run again, sends
only what did not arrive.

A file is read once and cut with the registry's FastCDC parameters, its chunks named
(BLAKE3, which frees the GIL). It is not hashed whole here: the registry checks the
sha256 of the file it reassembles from the chunks before the file exists, and its
verdict is reported as a local mismatch would be (the same wording), so a second
sha256 on the client's cores would only slow the push. A Stored member is cut where
it lies in the mapped zip file (no copies); a compressed one as it is decompressed. Every
``BATCH_BYTES`` of chunks, a worker asks the registry which it lacks and uploads
those in one request; ``UPLOAD_WORKERS`` batches are in flight at once, and at most
twice that many are held. A request holds at most the registry's ``max_batch_records``
chunks, a chunk shorter than ``min_size`` (a file's last) counted as ``min_size`` bytes,
and no more than ``max_concurrent_uploads`` uploads and assemblies are in flight at once
(the registry's share for one client). Once a file's chunks are all sent, it is
assembled; chunks that GC took in between (a 400 naming ``missing_chunks``) are cut from
the file again and sent, a few rounds at most. A file the registry will not assemble
(413: too many repeats of too few chunks, like a large all-zero file) is sent whole. When
the chunks do not make the file's sha256, the registry says no more than that: the file
is hashed here to say what it holds instead, as a local check would have.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from registry.carton.digests import mismatch_message
from registry.carton.streams import MiB, Readable, read_full
from registry.chunking import CHUNK_RECORD, Chunker, ChunkParams, chunk_hash
from registry.client.transport import ClientError, Progress, RegistryClient, Tally

UPLOAD_WORKERS = 4
BATCH_BYTES = 16 * MiB
"""Chunks per question to the registry, and at most per upload request: what a killed push
loses is at most ``UPLOAD_WORKERS`` of these."""
READ_BYTES = 4 * MiB
"""Pieces handed from the hashing thread to the cutting one: big enough for both to run."""
ASSEMBLE_ROUNDS = 2
"""Rounds of re-sending chunks that GC took before assembling gives up (and the push
sends the whole carton instead)."""
RECORDS_PART = MiB

Chunk = tuple[str, bytes | memoryview]
"""A chunk's BLAKE3 name and its bytes."""

Source = memoryview | Iterable[bytes]
"""A file's bytes: all at hand (a mapped Stored member), or as a stream of pieces."""


@dataclass(frozen=True)
class ChunkTerms:
    """What ``GET /api/v1/chunking`` announces: how to cut, and how much to send at once."""

    params: ChunkParams
    min_file_bytes: int
    max_batch_bytes: int
    max_query: int
    max_assemble: int
    """Chunk names one assembly takes (``max_query`` from registries that predate it)."""
    max_batch_records: int = 1 << 31
    """Chunks one upload request holds (no limit from registries that predate it)."""
    max_concurrent_uploads: int = UPLOAD_WORKERS
    """Uploads and assemblies in flight at once: the registry's share for one client."""
    cut_upload_type: str | None = None
    """The ``Content-Type`` of a cut upload (``client.cut_upload``); None from registries
    that predate them (whole files then go as they are)."""
    cut_files_type: str | None = None
    """The ``Content-Type`` of a cut upload of several files (``client.cut_upload``); None
    from registries that predate it (each file then goes in a request of its own)."""

    @classmethod
    def fetch(cls, client: RegistryClient) -> ChunkTerms:
        body = client.chunking()
        try:
            return cls(
                ChunkParams.from_json(body),
                int(body["min_file_bytes"]),
                int(body["max_batch_bytes"]),
                int(body["max_query"]),
                int(body.get("max_assemble", body["max_query"])),
                int(body.get("max_batch_records", 1 << 31)),
                int(body.get("max_concurrent_uploads", UPLOAD_WORKERS)),
                cut_type if isinstance(cut_type := body.get("cut_upload_type"), str) else None,
                files_type if isinstance(files_type := body.get("cut_files_type"), str) else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ClientError(f"the registry's chunking parameters are unusable: {exc}") from exc


def read_pieces(reader: Readable) -> Iterator[bytes]:
    """A member's bytes in ``READ_BYTES`` pieces (the reader checks its CRC at the end)."""
    while piece := read_full(reader, READ_BYTES):
        yield piece


class ChunkCutter:
    """Cuts a file into named chunks (it is not hashed whole: module doc)."""

    def __init__(self, params: ChunkParams) -> None:
        self.params = params

    def chunks(self, source: Source, progress: Progress | None = None) -> Iterator[list[Chunk]]:
        """The file's chunks in order, a few MiB at a time; ``progress`` is told the bytes
        cut."""
        if isinstance(source, memoryview):
            return self._chunks_in_view(source, progress)
        return self._chunks_of_stream(source, progress)

    def _chunks_in_view(self, view: memoryview, progress: Progress | None) -> Iterator[list[Chunk]]:
        """Chunks as slices of ``view`` (no copies)."""
        batch: list[Chunk] = []
        size = 0
        for cut in self.params.fastcdc().cut_buf(view):
            data = view[cut.offset : cut.offset + cut.length]
            batch.append((chunk_hash(data), data))
            size += cut.length
            if size >= READ_BYTES:
                if progress is not None:
                    progress(size)
                yield batch
                batch, size = [], 0
        if progress is not None:
            progress(size)
        yield batch

    def _chunks_of_stream(
        self, pieces: Iterable[bytes], progress: Progress | None
    ) -> Iterator[list[Chunk]]:
        """The chunks each piece completes, cut in a second thread while this one reads
        (decompresses) the next piece."""
        chunker = Chunker(self.params)

        def cut(piece: bytes | None) -> list[Chunk]:
            done = chunker.finish() if piece is None else chunker.feed(piece)
            return [(chunk_hash(c), c) for c in done]

        with ThreadPoolExecutor(1, thread_name_prefix="chunk-cut") as cutter:
            previous: Future[list[Chunk]] | None = None
            for piece in pieces:
                current = cutter.submit(cut, piece)  # runs after ``previous``: one worker
                if progress is not None:
                    progress(len(piece))
                if previous is not None:
                    yield previous.result()
                previous = current
            last = cutter.submit(cut, None)
            if previous is not None:
                yield previous.result()
            yield last.result()


def records(chunks: list[Chunk]) -> Iterator[bytes]:
    """An upload body: per chunk, its 32-byte digest, 4-byte big-endian length and bytes;
    in parts of about ``RECORDS_PART`` bytes (few sends, one copy of each chunk)."""
    parts: list[bytes | memoryview] = []
    size = 0
    for name, data in chunks:
        parts += (CHUNK_RECORD.pack(bytes.fromhex(name), len(data)), data)
        size += CHUNK_RECORD.size + len(data)
        if size >= RECORDS_PART:
            yield b"".join(parts)
            parts, size = [], 0
    if parts:
        yield b"".join(parts)


def records_size(chunks: list[Chunk]) -> int:
    return sum(CHUNK_RECORD.size + len(data) for _, data in chunks)


PROBE_WINDOWS = 4
PROBE_BYTES = MiB
"""A probe cuts this many windows of this many bytes, spread over the file."""
PROBE_SKIP = 2
"""Chunks a window not at the file's start drops before its cuts are taken as the whole
file's (FastCDC falls in step with a cut from the start after a chunk or two)."""


def probe_names(params: ChunkParams, source: Source, size: int) -> list[str]:
    """Names of a few chunks of a file, as a cut of the whole file would name them, from
    ``PROBE_WINDOWS`` windows spread over it (only the first of a streamed, compressed
    member). If the registry holds none of them, it holds nothing of the file: not a
    version of it with some regions changed, not the part an interrupted upload left.
    Such a file goes whole and the registry cuts it (no cutting and naming here, on cores
    the registry shares on one machine); any other goes as the chunks it lacks."""
    windows: list[tuple[int, bytes | memoryview]]
    if isinstance(source, memoryview):
        starts = sorted({size * k // PROBE_WINDOWS for k in range(PROBE_WINDOWS)})
        windows = [(start, source[start : start + PROBE_BYTES]) for start in starts]
    else:
        pieces, head = iter(source), bytearray()
        try:
            while len(head) < PROBE_BYTES and (piece := next(pieces, None)) is not None:
                head += piece
        finally:
            close = getattr(pieces, "close", None)
            if close is not None:
                close()  # the member's reader with it
        windows = [(0, bytes(head[:PROBE_BYTES]))]
    names: list[str] = []
    for start, window in windows:
        cuts = list(params.fastcdc().cut_buf(window)) if len(window) else []
        if start + len(window) < size:
            cuts = cuts[:-1]  # cut by the window's end, not by the content
        if start > 0:
            cuts = cuts[PROBE_SKIP:]
        names += (chunk_hash(window[c.offset : c.offset + c.length]) for c in cuts)
    return list(dict.fromkeys(names))


def as_pieces(source: Source) -> Iterator[bytes]:
    """A file's bytes as pieces of about ``READ_BYTES``, whatever form it is at hand in."""
    if isinstance(source, memoryview):
        for at in range(0, len(source), READ_BYTES):
            yield bytes(source[at : at + READ_BYTES])
    else:
        yield from source


@dataclass(frozen=True)
class ChunkedFile:
    """A file whose chunks have been sent (or found present): enough to assemble it."""

    sha256: str
    size: int
    names: list[str]
    where: str  # "<carton>: <member>", for errors
    reread: Callable[[], Source]  # the file's bytes again, to resend lost chunks


class ChunkUploader:
    """Sends files as chunks over one push: ``send_chunks`` then ``assemble`` per file,
    ``finish`` once; ``close`` always."""

    def __init__(self, client: RegistryClient, terms: ChunkTerms, tally: Tally) -> None:
        self.client = client
        self.terms = terms
        self.tally = tally
        self.batch_bytes = min(BATCH_BYTES, terms.max_batch_bytes)
        # Uploads and assemblies in flight, this push's whole share of the registry's slots
        # (``push`` sends its small files whole under it too).
        self.slots = threading.BoundedSemaphore(max(1, terms.max_concurrent_uploads))
        self._claimed: set[str] = set()  # asked about (sent, or present) in this push
        self._claims = threading.Lock()
        self._uploads = ThreadPoolExecutor(UPLOAD_WORKERS, thread_name_prefix="chunk-upload")
        self._assembler = ThreadPoolExecutor(UPLOAD_WORKERS, thread_name_prefix="chunk-assemble")
        self._room = threading.BoundedSemaphore(2 * UPLOAD_WORKERS)
        self._batches: list[Future[None]] = []
        self._assembled: list[Future[None]] = []

    def close(self) -> None:
        for pool in (self._uploads, self._assembler):  # queued uploads first: nothing waits
            pool.shutdown(wait=True, cancel_futures=True)

    # -- sending ---------------------------------------------------------------------
    def send_chunks(self, source: Source, progress: Progress | None = None) -> list[str]:
        """Send the chunks of one file that the registry lacks; its chunk names, in order.
        Whether they make the file MANIFEST names is the registry's check (``assemble``)."""
        cutter = ChunkCutter(self.terms.params)
        names: list[str] = []
        batch: list[Chunk] = []
        size = 0
        for done in cutter.chunks(source, progress):
            for chunk in done:
                names.append(chunk[0])
                if batch and self._full(len(batch), size, chunk):
                    self._submit(batch)  # what one upload request takes, not two
                    batch, size = [], 0
                batch.append(chunk)
                size += self._charge(chunk)
        if batch:
            self._submit(batch)
        return names

    def _charge(self, chunk: Chunk) -> int:
        """Bytes the registry counts a chunk as: a short one (a file's last) as ``min_size``."""
        return max(len(chunk[1]), self.terms.params.min_size)

    def _full(self, count: int, charged: int, chunk: Chunk) -> bool:
        """Whether a request of ``count`` chunks charged ``charged`` bytes takes no ``chunk``."""
        limit = self.terms.max_batch_records
        return count >= limit or charged + self._charge(chunk) > self.batch_bytes

    def assemble(self, file: ChunkedFile) -> None:
        """Assemble ``file`` once every batch submitted so far has been sent."""
        sent = list(self._batches)
        self._assembled.append(self._assembler.submit(self._assemble_when_sent, file, sent))

    def finish(self) -> None:
        """Wait for every upload and assembly (raising the first failure)."""
        for future in [*self._batches, *self._assembled]:
            future.result()
        self._batches, self._assembled = [], []

    def _submit(self, batch: list[Chunk]) -> None:
        for done in [f for f in self._batches if f.done()]:
            done.result()  # a failed batch stops the push now, not at the end
        self._room.acquire()
        future = self._uploads.submit(self._send_batch, batch)
        future.add_done_callback(lambda _: self._room.release())
        self._batches.append(future)

    def _send_batch(self, batch: list[Chunk]) -> None:
        """Ask about the chunks no other batch of this push asked about; upload the missing."""
        with self._claims:
            fresh = {name: data for name, data in batch if name not in self._claimed}
            self._claimed.update(fresh)
        repeated = sum(len(data) for _, data in batch) - sum(len(d) for d in fresh.values())
        names = list(fresh)
        missing: list[str] = []
        for start in range(0, len(names), self.terms.max_query):
            missing += self.client.missing_chunks(names[start : start + self.terms.max_query])
        lacking = set(missing)
        self._upload([(n, d) for n, d in fresh.items() if n in lacking])
        known = sum(len(d) for n, d in fresh.items() if n not in lacking)
        self.tally.add(reused=known + repeated)

    def _upload(self, chunks: Iterable[Chunk]) -> None:
        """POST ``chunks`` in requests of at most ``batch_bytes`` of chunks, as they come."""
        request: list[Chunk] = []
        size = 0
        for chunk in chunks:
            if request and self._full(len(request), size, chunk):
                self._post(request)
                request, size = [], 0
            request.append(chunk)
            size += self._charge(chunk)
        if request:
            self._post(request)

    def _post(self, request: list[Chunk]) -> None:
        with self.slots:
            answer = self.client.post_chunks(records(request), records_size(request))
        self.tally.add(
            moved=sum(len(data) for _, data in request),
            stored=int(answer.get("bytes_stored") or 0),
            healed=int(answer.get("bytes_healed") or 0),
        )

    # -- assembling ------------------------------------------------------------------
    def _assemble_when_sent(self, file: ChunkedFile, sent: list[Future[None]]) -> None:
        for batch in sent:
            batch.result()
        rounds = 0
        while True:
            try:
                with self.slots:
                    answer = self.client.assemble_blob(file.sha256, file.size, file.names)
                self.tally.add(new_files=file.size if answer.get("created") else 0)
                return
            except ClientError as exc:
                mismatch = exc.status == 400 and exc.sha256_mismatch
                if mismatch:
                    self._check_whole(file)  # not what MANIFEST says: raises, naming both
                if mismatch or exc.status == 413:  # the registry's chunks; too many repeats
                    self._send_whole(file)
                    return
                if exc.status != 400 or not exc.missing_chunks or rounds == ASSEMBLE_ROUNDS:
                    raise
                lost = set(exc.missing_chunks)
            rounds += 1
            self._resend(file, lost)

    def _check_whole(self, file: ChunkedFile) -> None:
        """ClientError in a local check's words if ``file`` is not what MANIFEST says."""
        h = hashlib.sha256()
        for piece in as_pieces(file.reread()):
            h.update(piece)
        if h.hexdigest() != file.sha256:
            raise ClientError(mismatch_message(file.where, h.hexdigest(), file.sha256))

    def _send_whole(self, file: ChunkedFile) -> None:
        """Upload ``file`` as one blob: the registry cuts it itself from every byte."""
        with self.slots:
            answer = self.client.put_blob(file.sha256, as_pieces(file.reread()), file.size)
        self.tally.add_upload(file.size, answer)

    def _resend(self, file: ChunkedFile, lost: set[str]) -> None:
        """Cut the file again and upload the ``lost`` chunks (GC took them)."""
        cutter = ChunkCutter(self.terms.params)

        def wanted() -> Iterator[Chunk]:
            for done in cutter.chunks(file.reread()):
                for name, data in done:
                    if name in lost:
                        lost.discard(name)
                        yield name, data

        self._upload(wanted())
