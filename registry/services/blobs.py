"""Single-blob verbs: client-side dedup (which blobs are missing) and verified uploads."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from functools import partial
from typing import Any

from sqlalchemy import select

from registry.blobstore.errors import BlobDigestMismatch
from registry.carton.streams import CHUNK, Readable
from registry.db.queries import in_chunks
from registry.db.tables import Blob
from registry.errors import (
    InvalidBody,
    TruncatedUpload,
    UploadAbandoned,
    UploadStalled,
    UploadTooLarge,
)
from registry.services.chunkstore.damage import damaged_files
from registry.services.chunkstore.files import FileWriter
from registry.services.chunkstore.index import record_files
from registry.services.chunkstore.layout import FileLayout
from registry.services.chunkstore.wholedamage import damaged_blobs
from registry.services.chunkstore.writer import PackSession
from registry.services.context import RegistryContext
from registry.services.cut_upload import cut_files, cut_records
from registry.services.leases import Lease
from registry.services.names import require_sha256
from registry.services.private_dedup import record_uploads, restricted, usable_blobs

log = logging.getLogger("registry.blobs")

MAX_MISSING_QUERY = 100_000
_STAT_THREADS = 8


def stored_subset(ctx: RegistryContext, hashes: Iterable[str]) -> set[str]:
    """The hashes whose objects the blob store really holds (rows can outlive a lost object).

    Checked in a few threads: on S3 each check is a HEAD request.
    """
    wanted = list(hashes)
    if len(wanted) <= 4:
        return {h for h in wanted if ctx.blobs.exists(h)}
    with ThreadPoolExecutor(_STAT_THREADS, thread_name_prefix="blob-stat") as pool:
        return {h for h, ok in zip(wanted, pool.map(ctx.blobs.exists, wanted), strict=True) if ok}


def missing_blobs(ctx: RegistryContext, hashes: Iterable[object]) -> list[str]:
    """Blobs a client must upload: no row, a whole blob's row whose object was lost or is
    recorded as damaged (the upload replaces it), or a chunked file over a chunk recorded
    as damaged (its chunks are then negotiated)."""
    given = list(hashes)
    if len(given) > MAX_MISSING_QUERY:
        raise InvalidBody(f"at most {MAX_MISSING_QUERY} hashes per request")
    wanted = list(dict.fromkeys(require_sha256(h, "sha256") for h in given))
    rows: dict[str, bool] = {}
    with ctx.sessions() as session:
        for chunk in in_chunks(wanted):
            for r in session.execute(
                select(Blob.sha256, Blob.chunked).where(Blob.sha256.in_(chunk))
            ):
                rows[r.sha256] = bool(r.chunked)
        if rows and restricted(session):  # present only if the caller may already read it
            usable = usable_blobs(ctx, session, rows)
            rows = {sha: chunked for sha, chunked in rows.items() if sha in usable}
        damaged = damaged_files(session, rows)
    whole = [sha for sha, chunked in rows.items() if not chunked and sha not in damaged]
    chunked = {sha for sha, is_chunked in rows.items() if is_chunked} - damaged
    present = chunked | stored_subset(ctx, whole)
    return [h for h in wanted if h not in present]


class _Limited:
    def __init__(self, raw: Readable, limit: int) -> None:
        self._raw, self._limit, self._seen = raw, limit, 0

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self._seen += len(data)
        if self._seen > self._limit:
            raise UploadTooLarge(f"blob exceeds REGISTRY_MAX_UPLOAD_BYTES ({self._limit} bytes)")
        return data


BODY_CUT_SHORT = (TruncatedUpload, UploadAbandoned, UploadStalled)
"""A body that stopped arriving: the upload's whole chunks are kept (``_keep_cut``)."""


def _keep_cut(ctx: RegistryContext, packs: PackSession, writers: list[FileWriter]) -> bool:
    """Publish the chunks of an upload cut short, as ``POST /api/v1/chunks`` would have:
    each is named by its own BLAKE3, so they are good data whatever the file would have
    been. A client that runs the push again finds them (``chunks/missing``) and sends
    the rest only; nothing uses them until then, and GC takes them after its grace
    period if nothing does. False (and nothing kept) when that fails."""
    try:
        writers[-1].keep_cut()  # the files before it were closed (and their chunks placed)
        packs.keep_unused()
    except Exception:
        log.warning("could not keep the chunks of an upload cut short", exc_info=True)
        return False
    record_uploads(ctx, [name for writer in writers for name in writer.names or ()])
    return True


def put_blob(
    ctx: RegistryContext, sha256: str, stream: Readable, *, cut: bool = False
) -> dict[str, Any]:
    """Store one blob (chunked when large), verified against its name, then its row
    (``_store_files``).

    ``cut``: the body is the file as the chunks its sender cut (``services.cut_upload``).
    """
    require_sha256(sha256, "sha256")
    source = _Limited(stream, ctx.settings.max_upload_bytes)

    if cut:
        write = partial(_write_chunks, cut_records(source, ctx.chunk_params))
    else:
        write = partial(_write_bytes, source)
    return _store_files(ctx, [(sha256, write)])[0]


def put_blobs(ctx: RegistryContext, stream: Readable) -> list[dict[str, Any]]:
    """Store the files of a ``CUT_FILES_TYPE`` body (``services.cut_upload.cut_files``),
    each verified against its name, all in one lease, pack session and transaction
    (``_store_files``); the answers in the body's order, as ``put_blob`` gives them."""
    source = _Limited(stream, ctx.settings.max_upload_bytes)
    files = cut_files(source, ctx.chunk_params, ctx.settings.chunk_min_file_bytes)
    return _store_files(
        ctx, ((sha256, partial(_write_chunks, chunks)) for sha256, _, chunks in files)
    )


def _write_bytes(source: Readable, writer: FileWriter) -> None:
    """A plain upload's bytes into the file's writer, which cuts them."""
    for data in iter(lambda: source.read(CHUNK), b""):
        writer.write(data)


def _write_chunks(chunks: Iterable[bytes | memoryview], writer: FileWriter) -> None:
    """A cut upload's chunks (``cut_records``) into the file's writer, each as received."""
    for chunk in chunks:
        writer.write_chunk(chunk)


def _store_files(
    ctx: RegistryContext, files: Iterable[tuple[str, Callable[[FileWriter], None]]]
) -> list[dict[str, Any]]:
    """Each of ``files`` (its sha256, and what writes its bytes into a ``FileWriter``, in
    turn: a file's last chunks are placed while the next one arrives), verified against
    its name, then all their rows in one transaction; one answer each (``_uploaded``).

    One lease and one pack session for all. Any file that is not what it says, or any
    malformed record, rejects the request: no file of it is indexed. A body cut short
    keeps the whole chunks of every file so far (``_keep_cut``).

    A blob recorded as damaged is healed: its object replaced (``wholedamage``), or, when
    its bytes now go into chunks, its row moved onto them; ``bytes_healed`` says so.

    The rows make the files visible to dedup queries; unreferenced, they are collected by
    GC after the grace period. Leased like a push, and indexed only while the lease
    proves GC took nothing.
    """
    with ctx.sessions() as session:
        hiding = restricted(session)
    with Lease(ctx.sessions, ctx.settings.lease_timeout) as lease:
        packs = PackSession(ctx, lease)
        kept = False
        try:
            sent: list[tuple[str, Future[FileLayout]]] = []
            writers: list[FileWriter] = []
            try:
                for sha256, write in files:
                    writers.append(FileWriter(packs, collect_names=hiding))
                    write(writers[-1])
                    sent.append((sha256, writers[-1].close_later()))
            except BODY_CUT_SHORT:
                # The files before are closed: their last chunks are placed once these are
                # done (finishing the session drops the tasks its threads have not started).
                wait([done for _, done in sent])
                if writers:
                    kept = _keep_cut(ctx, packs, writers)
                raise
            layouts = [(sha256, done.result()) for sha256, done in sent]
            for sha256, layout in layouts:
                if layout.sha256 != sha256:
                    raise BlobDigestMismatch(sha256, layout.sha256, layout.size)
            packs.finish()
            shas = list(dict.fromkeys(sha256 for sha256, _ in layouts))
            with ctx.transaction() as session:
                lease.fence(session)
                # Stored already for someone else: new to this caller, as it knows.
                hidden = set(shas) - usable_blobs(ctx, session, shas) if hiding else set()
                ids = packs.pack_ids(session)  # forgets a damaged whole object it replaced
                # A damaged whole object of a file now chunked: the row takes the chunks
                # (record_files forgets the object's damage).
                damaged = set(damaged_blobs(session, shas))
                rechunked = {sha for sha, lay in layouts if lay.chunked and sha in damaged}
                new = record_files(session, [lay for _, lay in layouts], ids, replace=rechunked)
                lease.release(session)
        except BaseException:
            if not kept:
                packs.discard()
            raise
    ctx.caches.index_changed()
    record_uploads(ctx, shas)
    # The session's chunks written in place of damaged copies are counted once, in the
    # first answer: a chunk healed may be shared by several of the files.
    return [
        _uploaded(layout, new, packs, sha in rechunked, sha in hidden, packs.healed_bytes * (not i))
        for i, (sha, layout) in enumerate(layouts)
    ]


def _uploaded(
    layout: FileLayout,
    new: set[str],
    packs: PackSession,
    rechunked: bool,
    hidden_before: bool,
    healed: int,
) -> dict[str, Any]:
    """One uploaded file's answer (``UploadedBlob``) once its row is in the index;
    ``healed``: the chunk bytes its session wrote in place of damaged copies that are
    counted in this answer."""
    sha256 = layout.sha256
    # Created: the blob could not be served before (an object left without a row could).
    created = sha256 in new and (layout.chunked or sha256 in packs.created_whole)
    stored = layout.new_chunk_bytes if layout.chunked else (layout.size if created else 0)
    # Written again in place of damaged copies: its chunks, or the whole object replaced.
    if sha256 not in new and (sha256 in packs.healed_whole or rechunked):
        healed += layout.new_chunk_bytes if layout.chunked else layout.size
    if hidden_before:  # stored already, for someone else: new to this caller, as it knows
        created, stored = True, layout.size
    return {
        "sha256": sha256,
        "size": layout.size,
        "created": created,
        "bytes_stored": stored,
        "bytes_healed": healed,
    }
