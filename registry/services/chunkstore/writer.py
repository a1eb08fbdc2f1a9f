"""Writing files into the chunk store as their bytes stream (docs/chunk-store.md).

A ``PackSession`` belongs to one push: it owns the push's open pack, remembers
the chunks it wrote, and looks up the rest in the index, leasing every pack it
relies on before trusting it. A ``FileWriter`` takes one file's bytes in
pieces of any size and hashes (sha256 for the file's identity, CRC-32 for
zip), cuts and names chunks, and hands them to the session in batches, one
index lookup per batch. Small files stay whole blobs.

Bytes first, rows second: sealed packs are published objects but get their
``packs`` and ``chunks`` rows only from ``publish(session)``, which the push
calls in its indexing transaction (``chunkstore.index.record_files`` writes the
files' rows there too). A rejected push ``discard``s: its open pack is
aborted and its sealed packs, which no row names and only its lease
protected, are deleted at once.
"""

from __future__ import annotations

import contextlib
import io
import logging
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.blobstore.base import PackWriter, new_pack_name
from registry.blobstore.chunking import ChunkParams
from registry.db.queries import in_chunks, insert_ignore
from registry.db.tables import Blob, Chunk, Pack
from registry.services.chunkstore.layout import (
    ChunkRef,
    pack_table_entry,
)
from registry.services.context import RegistryContext
from registry.services.leases import Lease, live_leased, lock_blobs_exclusive, lock_blobs_shared

if TYPE_CHECKING:
    from registry.services.chunkstore.files import FileWriter

log = logging.getLogger("registry.chunkstore")

MiB = 1024 * 1024
PACK_MAX_BYTES = 64 * MiB
LOOKUP_BATCH_BYTES = 16 * MiB
HANDOFF_BYTES = MiB  # per piece handed to the chunking thread (the GIL is shared below this)
PIECES_IN_FLIGHT = 4


@dataclass
class _OpenPack:
    writer: PackWriter
    table: list[bytes] = field(default_factory=list)
    chunks: list[tuple[str, ChunkRef]] = field(default_factory=list)


@dataclass(frozen=True)
class SealedPack:
    """A published pack object whose rows are not written yet."""

    name: str
    size: int
    table: bytes
    chunks: tuple[tuple[str, ChunkRef], ...]


class PackSession:
    """The packs one push writes and relies on, under that push's lease (module doc)."""

    def __init__(self, ctx: RegistryContext, lease: Lease) -> None:
        self.ctx = ctx
        self.lease = lease
        self.params: ChunkParams = ctx.chunk_params
        self._open: _OpenPack | None = None
        self._written: dict[str, ChunkRef] = {}  # chunks this session appended
        self._leased: set[str] = set()
        self._small: dict[str, bytes] = {}  # whole blobs waiting to be leased and written
        self._small_bytes = 0
        self._unpublished: list[SealedPack] = []
        self.created_whole: set[str] = set()  # whole blobs this session put into the store
        self.bytes_written = 0  # new bytes in the store: chunks appended, whole blobs created
        self.chunk_bytes_written = 0
        self.chunks_written = 0
        self._worker: ThreadPoolExecutor | None = None
        self._committer: ThreadPoolExecutor | None = None
        self._commits: list[tuple[Future[None], SealedPack]] = []

    # -- placing chunks ---------------------------------------------------------------

    def place(self, chunks: list[tuple[str, bytes | memoryview]]) -> list[ChunkRef]:
        """A reference for every (hash, bytes): an existing copy when leased, else a new one."""
        found = self.lookup({h for h, _ in chunks if h not in self._written})
        refs: list[ChunkRef] = []
        for digest, data in chunks:
            ref = self._written.get(digest) or found.get(digest)
            if ref is None:
                ref = self._append(digest, data)
            refs.append(ref)
        return refs

    def lookup(self, hashes: set[str]) -> dict[str, ChunkRef]:
        """Indexed chunks in live packs, each pack leased before it is trusted."""
        if not hashes:
            return {}
        found: dict[str, ChunkRef] = {}
        wanted = sorted(hashes)
        with self.ctx.sessions() as session:
            for batch in in_chunks(wanted):
                rows = session.execute(
                    select(Chunk.hash, Chunk.idx, Chunk.offset, Chunk.length, Pack.name)
                    .join(Pack, Pack.id == Chunk.pack_id)
                    .where(Chunk.hash.in_(batch), Pack.retired_at.is_(None))
                )
                for r in rows:
                    found[r.hash] = ChunkRef(r.name, r.idx, r.offset, r.length)
        unleased = {ref.pack for ref in found.values()} - self._leased
        if unleased:
            self._lease_packs(unleased)
            found = {h: ref for h, ref in found.items() if ref.pack in self._leased}
        return found

    def _lease_packs(self, names: set[str]) -> None:
        """Lease ``names`` under the shared GC lock; those still live join ``_leased``."""
        ordered = sorted(names)
        with self.ctx.transaction() as session:
            lock_blobs_shared(session)
            self.lease.add_packs(session, ordered)
            alive: set[str] = set()
            for batch in in_chunks(ordered):
                alive.update(
                    session.scalars(
                        select(Pack.name).where(Pack.name.in_(batch), Pack.retired_at.is_(None))
                    )
                )
        self._leased |= alive

    def _append(self, digest: str, data: bytes | memoryview) -> ChunkRef:
        if self._open is not None and self._open.writer.size + len(data) > PACK_MAX_BYTES:
            self._seal()
        if self._open is None:
            name = new_pack_name()
            with self.ctx.transaction() as session:
                self.lease.add_packs(session, [name])  # leased before its first byte exists
            self._leased.add(name)
            self._open = _OpenPack(self.ctx.blobs.new_pack(name))
        pack = self._open
        ref = ChunkRef(pack.writer.name, len(pack.table), pack.writer.size, len(data))
        pack.writer.write(data)
        pack.table.append(pack_table_entry(digest, len(data)))
        pack.chunks.append((digest, ref))
        self._written[digest] = ref
        self.bytes_written += len(data)
        self.chunk_bytes_written += len(data)
        self.chunks_written += 1
        return ref

    def _seal(self) -> None:
        """Publish the open pack's object (its rows come with ``publish``).

        The commit (an fsync and a rename, or completing a multipart upload) runs on
        its own thread while the next pack fills; ``finish`` waits for all of them.
        """
        pack, self._open = self._open, None
        if pack is None:
            return
        if self._committer is None:
            self._committer = ThreadPoolExecutor(1, thread_name_prefix="pack-commit")
        sealed = SealedPack(
            pack.writer.name, pack.writer.size, b"".join(pack.table), tuple(pack.chunks)
        )
        self._commits.append((self._committer.submit(pack.writer.commit), sealed))

    def _wait_commits(self) -> None:
        """Every sealed pack committed (and so publishable); the first failure raises."""
        commits, self._commits = self._commits, []
        failure: BaseException | None = None
        for future, sealed in commits:
            try:
                future.result()
                self._unpublished.append(sealed)
            except BaseException as exc:  # the writer aborted itself; nothing to publish
                failure = failure or exc
        if self._committer is not None:
            self._committer.shutdown(wait=True)
            self._committer = None
        if failure is not None:
            raise failure

    def publish(self, session: Session) -> dict[str, int]:
        """Rows for every sealed pack (in the caller's transaction); name -> id of each pack
        this session wrote or relies on."""
        for pack in self._unpublished:
            row = Pack(
                name=pack.name,
                size=pack.size,
                chunk_count=len(pack.chunks),
                chunk_table=pack.table,
            )
            session.add(row)
            session.flush()
            insert_ignore(
                session,
                Chunk.__table__,  # type: ignore[arg-type]
                [
                    {
                        "hash": digest,
                        "pack_id": row.id,
                        "idx": ref.idx,
                        "offset": ref.offset,
                        "length": ref.length,
                    }
                    for digest, ref in pack.chunks
                ],
            )
        ids: dict[str, int] = {}
        for batch in in_chunks(sorted(self._leased)):
            rows = session.execute(select(Pack.name, Pack.id).where(Pack.name.in_(batch)))
            ids.update((r.name, r.id) for r in rows)
        return ids

    def published(self) -> None:
        """The transaction that ran ``publish`` committed: those packs are the index's now."""
        self._unpublished = []

    # -- whole blobs --------------------------------------------------------------------

    def stage_whole(self, sha256: str, data: bytes) -> None:
        """A small file, written whole with others in a batch: one lease transaction each."""
        if sha256 not in self._small:
            self._small[sha256] = data
            self._small_bytes += len(data)
        if self._small_bytes >= LOOKUP_BATCH_BYTES or len(self._small) >= 256:
            self._write_whole()

    def _write_whole(self) -> None:
        if not self._small:
            return
        staged, self._small, self._small_bytes = self._small, {}, 0
        with self.ctx.transaction() as session:
            self.lease.add(session, staged)  # leased before the bytes are looked at
        for sha256, data in staged.items():
            put = self.ctx.blobs.put(sha256, io.BytesIO(data), size_hint=len(data))
            if put.created:
                self.created_whole.add(sha256)
                self.bytes_written += len(data)

    # -- lifecycle ----------------------------------------------------------------------

    def file_writer(self, *, crc: bool = True) -> FileWriter:
        from registry.services.chunkstore.files import FileWriter

        return FileWriter(self, crc=crc)

    def worker(self) -> ThreadPoolExecutor:
        """The thread that cuts, names and places this session's chunks, in order."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="chunker")
        return self._worker

    def _stop_worker(self) -> None:
        if self._worker is not None:
            self._worker.shutdown(wait=True, cancel_futures=True)
            self._worker = None

    def finish(self) -> None:
        """Write staged whole blobs and seal the open pack: everything placed is published."""
        self._stop_worker()
        self._write_whole()
        self._seal()
        self._wait_commits()

    def discard(self) -> None:
        """Undo what no row names yet: the open pack and the sealed, unpublished ones.

        Whole blobs stay (another push may rely on the same bytes); GC takes them.
        """
        self._stop_worker()
        with contextlib.suppress(BaseException):
            self._wait_commits()  # committed packs are then deleted below, like sealed ones
        self._small, self._small_bytes = {}, 0
        pack, self._open = self._open, None
        if pack is not None:
            pack.writer.abort()
        for sealed in self._unpublished:
            try:
                self.ctx.blobs.delete_pack(sealed.name)
            except Exception:  # GC collects an orphan pack after the grace period
                log.warning("could not delete pack %s of a rejected push", sealed.name)
        self._unpublished = []
        if self.created_whole:
            try:
                self._delete_unclaimed(sorted(self.created_whole))
            except Exception:  # GC collects them after the grace period
                log.warning("could not delete the blobs of a rejected push", exc_info=True)
            self.created_whole = set()

    def _delete_unclaimed(self, hashes: list[str]) -> None:
        """Delete blobs this session created that no row and no other live lease names.

        The same test GC applies, under the same exclusive lock, so a concurrent
        push that leased one of them keeps it.
        """
        timeout = self.ctx.settings.lease_timeout
        with self.ctx.transaction() as session:
            lock_blobs_exclusive(session)
            claimed = live_leased(session, hashes, timeout, excluding=self.lease.id)
            for batch in in_chunks(hashes):
                claimed.update(session.scalars(select(Blob.sha256).where(Blob.sha256.in_(batch))))
            for sha256 in hashes:
                if sha256 not in claimed:
                    self.ctx.blobs.delete(sha256)
