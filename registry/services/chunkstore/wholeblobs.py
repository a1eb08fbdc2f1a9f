"""Small files of a push, stored whole (content-addressed) rather than chunked.

A file whose stored object is recorded as damaged (``wholedamage``) is written with
``replace``: its verified bytes take the damaged object's place, and the push's
indexing transaction deletes the record (``PackSession.pack_ids``).
"""

from __future__ import annotations

import io
import logging

from sqlalchemy import select

from registry.db.queries import in_chunks
from registry.db.tables import Blob
from registry.services.chunkstore.wholedamage import damaged_blobs
from registry.services.context import RegistryContext
from registry.services.leases import Lease, live_leased, lock_blobs_exclusive

log = logging.getLogger("registry.chunkstore")

MiB = 1024 * 1024
BATCH_BYTES = 16 * MiB
BATCH_FILES = 256


class WholeBlobs:
    """Whole blobs staged and written in batches: one lease transaction per batch."""

    def __init__(self, ctx: RegistryContext, lease: Lease) -> None:
        self.ctx = ctx
        self.lease = lease
        self._staged: dict[str, bytes] = {}
        self._staged_bytes = 0
        self.created: set[str] = set()  # blobs this push put into the store
        self.replaced: set[str] = set()  # of ``created``: written over a damaged object

    def stage(self, sha256: str, data: bytes) -> None:
        if sha256 not in self._staged:
            self._staged[sha256] = data
            self._staged_bytes += len(data)
        if self._staged_bytes >= BATCH_BYTES or len(self._staged) >= BATCH_FILES:
            self.flush()

    def flush(self) -> None:
        """Write what is staged, each blob leased before its bytes are looked at."""
        if not self._staged:
            return
        staged, self._staged, self._staged_bytes = self._staged, {}, 0
        with self.ctx.transaction() as session:
            self.lease.add(session, staged)
            damaged = damaged_blobs(session, staged)
        for sha256, data in staged.items():
            replace = sha256 in damaged
            put = self.ctx.blobs.put(sha256, io.BytesIO(data), size_hint=len(data), replace=replace)
            if put.created:
                self.created.add(sha256)
            if replace:
                self.replaced.add(sha256)

    def discard(self) -> None:
        """Forget what is staged; delete the blobs this push created that no row and no
        other live lease names (GC's test, under the same exclusive lock, so a
        concurrent push that leased one of them keeps it)."""
        self._staged, self._staged_bytes = {}, 0
        created, self.created = sorted(self.created), set()
        if not created:
            return
        try:
            timeout = self.ctx.settings.lease_timeout
            with self.ctx.transaction() as session:
                lock_blobs_exclusive(session)
                claimed = live_leased(session, created, timeout, excluding=self.lease.id)
                for batch in in_chunks(created):
                    claimed.update(
                        session.scalars(select(Blob.sha256).where(Blob.sha256.in_(batch)))
                    )
                for sha256 in created:
                    if sha256 not in claimed:
                        self.ctx.blobs.delete(sha256)
        except Exception:  # GC collects them after the grace period
            log.warning("could not delete the blobs of a rejected push", exc_info=True)
