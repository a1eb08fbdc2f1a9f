"""Writing files into the chunk store as their bytes stream (docs/chunk-store.md).

A ``PackSession`` belongs to one push: it decides where each chunk comes from
(looked up in the index, each pack leased before it is trusted; or claimed and
appended by ``packing.PackAppender``; or waited for), runs the threads that cut
and place them, and finishes or discards the push's writes. A ``FileWriter``
(``files``) takes one file's bytes in pieces of any size and hashes (sha256
for the file's identity, CRC-32 for zip), cuts and names chunks, and hands them
to the session in batches, one index lookup per batch. Small files stay whole
blobs (``wholeblobs``); claims are ``claims``.

Each chunk is stored once, even by concurrent pushes on several servers: a
chunk the index lacks is *claimed* (a ``chunk_claims`` row, unique per chunk)
before its bytes go into a pack. A push that loses a claim waits for the
winner's copy: it first seals its own open pack (so no two pushes ever wait on
each other), marks the claim wanted (so the winner seals its pack at its next
batch), and polls the index. A claim whose holder's lease went stale is taken
over; after ``lease_timeout`` of waiting on a live holder the push writes its
own copy rather than stall.

Bytes first, rows second: a sealed pack's object is committed, then its
``packs`` and ``chunks`` rows are inserted at once (and its claims dropped),
so concurrent pushes find its chunks. The files' rows come later, in the
push's indexing transaction (``chunkstore.index.record_files``, with the
pack ids from ``pack_ids``). A rejected push ``discard``s: its open pack is
aborted and its packs that no file uses and no other push has leased are
deleted at once (GC takes the rest).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import Connection, select
from sqlalchemy.orm import Session

from registry.chunking import ChunkParams
from registry.db.queries import in_chunks, in_list
from registry.db.tables import Chunk, Pack
from registry.services.chunkstore.claims import ChunkClaims
from registry.services.chunkstore.damage import heal, undamaged_copy
from registry.services.chunkstore.layout import ChunkRef
from registry.services.chunkstore.packing import PackAppender
from registry.services.chunkstore.wholeblobs import WholeBlobs
from registry.services.chunkstore.wholedamage import forget_blob_damage
from registry.services.context import RegistryContext
from registry.services.leases import Lease, lock_blobs_shared

log = logging.getLogger("registry.chunkstore")

CLAIM_POLL_FIRST = 0.01
CLAIM_POLL_MAX = 0.25
"""Seconds between looks at the index while waiting for another push's chunks (doubling)."""


class PackSession:
    """Where one push's chunks come from and go, under that push's lease (module doc)."""

    def __init__(self, ctx: RegistryContext, lease: Lease) -> None:
        self.ctx = ctx
        self.lease = lease
        self.params: ChunkParams = ctx.chunk_params
        self._claims = ChunkClaims(ctx, lease)
        self._packs = PackAppender(ctx, lease)
        self._whole = WholeBlobs(ctx, lease)
        self._leased: set[str] = set()  # packs of other pushes this one relies on
        # Whether the last batch placed found none of its chunks in the index: the next is
        # then claimed before it is looked up, in one transaction (``place``).
        self._new_bytes = False
        self.duplicate_chunks = 0  # written after waiting ``lease_timeout`` on a live claim
        self.healed: set[str] = set()  # chunks whose damaged copies good ones replaced
        self.healed_bytes = 0  # bytes of those this push wrote the good copies of
        self.healed_whole: set[str] = set()  # whole blobs it replaced, their records deleted
        self._worker: ThreadPoolExecutor | None = None
        self._placer: ThreadPoolExecutor | None = None
        self._hasher: ThreadPoolExecutor | None = None

    @property
    def chunk_bytes_written(self) -> int:
        return self._packs.bytes

    @property
    def chunks_written(self) -> int:
        return self._packs.count

    @property
    def created_whole(self) -> set[str]:
        """Whole blobs this push put into the store."""
        return self._whole.created

    # -- placing chunks ---------------------------------------------------------------

    def place(self, chunks: Sequence[tuple[str, bytes | memoryview]]) -> list[ChunkRef]:
        """A reference for every (hash, bytes): an existing copy when leased, else a new
        one, written by this push only when it holds the chunk's claim (module doc)."""
        written = self._packs.written
        mine = {h: ref for h, _ in chunks if (ref := written(h)) is not None}
        data = {h: d for h, d in chunks if h not in mine}
        claim_first = self._new_bytes  # the last batch was all new: claim, then look
        found = {} if claim_first else self.lookup(set(data))
        shared = bool(found)  # some chunks were in the index, or another push's to write
        unknown = [h for h in data if h not in found]
        wanted: bool | None = None  # whether another push waits for one of our claims
        if unknown:
            won, published, wanted = self._claim(unknown, take_over=False, look_up_all=claim_first)
            found.update(published)
            shared = shared or bool(published)
            for digest in unknown:  # in file order: consecutive chunks make one segment
                if digest in won and digest not in found:
                    found[digest] = self._packs.append(digest, data[digest])
            lost = {h: data[h] for h in unknown if h not in won and h not in found}
            if lost:
                shared = True
                found.update(self._await(lost))
        self._new_bytes = bool(data) and not shared
        if self._packs.has_open_chunks and (
            wanted if wanted is not None else self._claims.any_wanted()
        ):
            self._packs.seal()  # another push waits for a chunk in the open pack
        found.update(mine)
        return [found[digest] for digest, _ in chunks]

    def lookup(self, hashes: set[str]) -> dict[str, ChunkRef]:
        """Indexed chunks in live packs, each pack leased before it is trusted.

        A copy recorded as damaged is not found: the caller writes the bytes again,
        and ``publish`` heals every reference to the damaged copy with them.
        """
        if not hashes:
            return {}
        with self.ctx.engine.connect() as connection:
            found = _indexed(connection, hashes)
        return self._trusted(found)

    def _trusted(self, found: dict[str, ChunkRef]) -> dict[str, ChunkRef]:
        """Of ``found``, the chunks in packs this push wrote or has leased (leasing the
        others first; a pack retired meanwhile drops out)."""
        trusted = self._leased | self._packs.opened
        unleased = {ref.pack for ref in found.values()} - trusted
        if unleased:
            self._lease_packs(unleased)
            trusted = self._leased | self._packs.opened
            found = {h: ref for h, ref in found.items() if ref.pack in trusted}
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

    def _claim(
        self, hashes: list[str], *, take_over: bool, look_up_all: bool = False
    ) -> tuple[set[str], dict[str, ChunkRef], bool]:
        """(claims won, chunks published since the lookup, whether a push waits for one
        of this push's claims), in one transaction: the index is looked at after the
        claims, so a chunk published between the lookup and the claim is found (its claim
        is dropped and the published copy used).

        ``look_up_all``: no lookup came first (``place`` claims first while a push's
        batches are all new), so every hash is looked up here, not only the claims won.
        """
        with self.ctx.core_transaction() as connection:
            won = self._claims.claim_in(connection, hashes, take_over=take_over)
            looked = set(hashes) if look_up_all else won
            published = _indexed(connection, looked) if looked else {}
            wanted = self._claims.any_wanted_in(connection)
        published = self._trusted(published)
        if published:
            self._claims.drop(published)
            won -= published.keys()
        return won, published, wanted

    def _await(self, lost: dict[str, bytes | memoryview]) -> dict[str, ChunkRef]:
        """References for chunks other pushes claimed: their copies once published, or
        ours when a claim comes free (its holder failed or went stale), or after
        ``lease_timeout`` of waiting on a holder that is alive but not sealing."""
        deadline = time.monotonic() + self.ctx.settings.lease_timeout
        delay = CLAIM_POLL_FIRST
        refs: dict[str, ChunkRef] = {}
        while lost:
            # Nothing this push claimed stays unpublished while it waits: no wait cycles.
            self._packs.seal()
            self._packs.wait()
            self._claims.want(lost)
            time.sleep(delay)
            delay = min(delay * 2, CLAIM_POLL_MAX)
            found = self.lookup(set(lost))
            refs.update(found)
            for digest in found:
                del lost[digest]
            if not lost:
                break
            won, published, _ = self._claim(list(lost), take_over=True)
            refs.update(published)
            if time.monotonic() > deadline:
                log.warning(
                    "waited %gs for %d chunks claimed by other pushes: storing them again",
                    self.ctx.settings.lease_timeout,
                    len(lost) - len(won),
                )
                self.duplicate_chunks += len(lost) - len(won)
                won = set(lost)
            for digest in list(lost):
                if digest in refs:
                    del lost[digest]
                elif digest in won:
                    refs[digest] = self._packs.append(digest, lost.pop(digest))
        return refs

    def pack_ids(self, session: Session) -> dict[str, int]:
        """Name -> id of each pack this session wrote or relies on (for segment rows), in
        the caller's transaction; damaged copies of chunks it wrote are healed there, and
        the records of damaged whole blobs it replaced are deleted."""
        ids: dict[str, int] = {}
        for batch in in_chunks(sorted(self._leased | self._packs.opened)):
            rows = session.execute(select(Pack.name, Pack.id).where(Pack.name.in_(batch)))
            ids.update((r.name, r.id) for r in rows)
        healed = heal(session, self._packs.copies_indexed_elsewhere(), ids)
        self.healed |= healed.keys()
        self.healed_bytes += sum(
            ref.length for ref in healed.values() if ref.pack in self._packs.opened
        )
        self.healed_whole |= forget_blob_damage(session, self._whole.replaced)
        return ids

    # -- whole blobs --------------------------------------------------------------------

    def stage_whole(self, sha256: str, data: bytes) -> None:
        """A small file, written whole with others in a batch: one lease transaction each."""
        self._whole.stage(sha256, data)

    # -- lifecycle ----------------------------------------------------------------------

    def worker(self) -> ThreadPoolExecutor:
        """The thread that cuts this session's chunks and hands them to ``placer``, in order."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="chunker")
        return self._worker

    def hasher(self) -> ThreadPoolExecutor:
        """The thread that takes the sha256 of this session's files (``FileWriter``), in the
        order their pieces are written, beside the chunking thread cutting the same pieces."""
        if self._hasher is None:
            self._hasher = ThreadPoolExecutor(1, thread_name_prefix="file-hasher")
        return self._hasher

    def placer(self) -> ThreadPoolExecutor:
        """The thread that places this session's cut chunks (``place``), in the order cut:
        a batch is looked up, claimed and appended while the chunking thread cuts the next
        (both in one thread, cutting waited for placing: the push's longest thread)."""
        if self._placer is None:
            self._placer = ThreadPoolExecutor(1, thread_name_prefix="chunk-placer")
        return self._placer

    def _stop_worker(self) -> None:
        # The chunking thread first: its tasks hand batches to (and may start) the placer,
        # and wait for the hashing thread's digests.
        if self._worker is not None:
            self._worker.shutdown(wait=True, cancel_futures=True)
            self._worker = None
        if self._placer is not None:
            self._placer.shutdown(wait=True, cancel_futures=True)
            self._placer = None
        if self._hasher is not None:
            self._hasher.shutdown(wait=True, cancel_futures=True)
            self._hasher = None

    def finish(self) -> None:
        """Write staged whole blobs and seal the open pack: everything placed is published."""
        self._stop_worker()
        self._whole.flush()
        self._packs.seal()
        self._packs.wait()

    def keep_unused(self) -> None:
        """Publish what was placed for no file (uploaded chunks, or those of an upload cut
        short): GC takes them after its grace period unless a file comes to use them. The
        lease is fenced (GC took nothing meanwhile), chunks recorded damaged that this push
        wrote again repoint every file over the damaged copy (``pack_ids``), and the lease
        is released."""
        self.finish()
        with self.ctx.transaction() as session:
            self.lease.fence(session)  # its packs were published as they were sealed
            self.pack_ids(session)
            self.lease.release(session)

    def discard(self) -> None:
        """Undo a rejected push's writes where nobody else relies on them.

        The open pack is aborted and this push's claims dropped (a push waiting on one
        claims it next). Packs it published, and whole blobs it created, are deleted
        unless a file row uses them or another live push has leased them (the test GC
        applies, under the same exclusive lock); what stays is GC's.
        """
        self._stop_worker()
        self._packs.discard()
        try:
            self._claims.drop_all()
        except Exception:  # they go with the lease (cascade), or expire with its heartbeat
            log.warning("could not drop the chunk claims of a rejected push", exc_info=True)
        self._whole.discard()


_INDEXED = (
    select(Chunk.hash, Chunk.idx, Chunk.offset, Chunk.length, Pack.name)
    .join(Pack, Pack.id == Chunk.pack_id)
    .where(
        in_list(Chunk.hash, "hashes"),
        Pack.retired_at.is_(None),
        undamaged_copy(),
    )
)
"""One statement, compiled and prepared once: a push runs it once or twice per batch of
about 200 chunks, and binding the hashes one by one into a new statement each time cost
more than the query (``in_list``: the hashes are one parameter)."""


def _indexed(connection: Connection, hashes: set[str]) -> dict[str, ChunkRef]:
    """Where the index has each of ``hashes``: in a live pack, on a copy not recorded as
    damaged (not yet leased: ``PackSession._trusted``)."""
    rows = connection.execute(_INDEXED, {"hashes": list(hashes)})
    return {r.hash: ChunkRef(r.name, r.idx, r.offset, r.length) for r in rows}
