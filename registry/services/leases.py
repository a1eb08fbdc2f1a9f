"""Upload leases and the lock that orders pushes against garbage collection.

A push records every blob it writes or relies on in a lease *before* it looks
at the store; GC deletes a blob only while holding the exclusive side of the
same lock and only if no live lease names it. So either GC ran first (the
blob is gone and the push writes it again) or the push's lease is visible to
GC. A heartbeat thread keeps the lease alive; a crashed push's lease expires
after ``lease_timeout`` and its orphans become collectable.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from types import TracebackType

from sqlalchemy import delete, select, text, update
from sqlalchemy.orm import Session

from registry.db.engine import transaction
from registry.db.queries import in_chunks, insert_ignore
from registry.db.tables import LeaseBlob, UploadLease

_GC_LOCK_ID = 0x6361_7274_6F6E_0002


def lock_blobs_shared(session: Session) -> None:
    """Pushes take the shared side; SQLite's BEGIN IMMEDIATE already serialises writers."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock_shared(:k)"), {"k": _GC_LOCK_ID})


def lock_blobs_exclusive(session: Session) -> None:
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _GC_LOCK_ID})


def live_leased(session: Session, hashes: Iterable[str], lease_timeout: float) -> set[str]:
    """The subset of ``hashes`` named by a lease whose heartbeat is recent."""
    cutoff = datetime.now(UTC) - timedelta(seconds=lease_timeout)
    wanted = list(set(hashes))
    found: set[str] = set()
    for chunk in in_chunks(wanted):
        rows = session.execute(
            select(LeaseBlob.sha256)
            .join(UploadLease, UploadLease.id == LeaseBlob.lease_id)
            .where(LeaseBlob.sha256.in_(chunk))
            .where(UploadLease.heartbeat_at >= cutoff)
        )
        found.update(r[0] for r in rows)
    return found


def holder_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Lease:
    """A live upload lease, heartbeated from a daemon thread until released."""

    def __init__(self, sessions, lease_timeout: float, holder: str = "") -> None:  # type: ignore[no-untyped-def]
        self._sessions = sessions
        self._interval = max(0.5, lease_timeout / 4)
        self.id = str(uuid.uuid4())
        with transaction(sessions) as session:
            session.add(UploadLease(id=self.id, holder=holder or holder_name()))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease-{self.id[:8]}", daemon=True)
        self._thread.start()

    def add(self, session: Session, hashes: Iterable[str]) -> None:
        insert_ignore(
            session,
            LeaseBlob.__table__,  # type: ignore[arg-type]
            [{"lease_id": self.id, "sha256": h} for h in sorted(set(hashes))],
        )

    def _beat(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                with transaction(self._sessions) as session:
                    session.execute(
                        update(UploadLease)
                        .where(UploadLease.id == self.id)
                        .values(heartbeat_at=datetime.now(UTC))
                    )
            except Exception:  # a missed beat is retried; the lease only expires after several
                continue

    def release(self, session: Session | None = None) -> None:
        """Drop the lease, in the caller's transaction when given (same commit as the rows)."""
        self._stop.set()
        if session is not None:
            session.execute(delete(UploadLease).where(UploadLease.id == self.id))
            return
        with transaction(self._sessions) as own:
            own.execute(delete(UploadLease).where(UploadLease.id == self.id))

    def stop_heartbeat(self) -> None:
        self._stop.set()

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if exc_type is not None:
            # A failed push: its lease goes now; what it wrote waits for GC's grace period.
            try:
                self.release()
            except Exception:
                pass
