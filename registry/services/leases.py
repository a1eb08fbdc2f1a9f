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
from sqlalchemy.orm import InstrumentedAttribute, Session, sessionmaker

from registry.db.engine import transaction
from registry.db.queries import in_chunks, insert_ignore
from registry.db.tables import LeaseBlob, LeasePack, UploadLease
from registry.errors import PushStalled

_GC_LOCK_ID = 0x6361_7274_6F6E_0002


def lock_blobs_shared(session: Session) -> None:
    """Pushes take the shared side; SQLite's BEGIN IMMEDIATE already serialises writers."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock_shared(:k)"), {"k": _GC_LOCK_ID})


def lock_blobs_exclusive(session: Session) -> None:
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _GC_LOCK_ID})


def live_leased_packs(
    session: Session, names: Iterable[str], lease_timeout: float, excluding: str | None = None
) -> set[str]:
    """The subset of pack ``names`` named by a lease (other than ``excluding``) that is alive."""
    return _named_by_live_leases(
        session, LeasePack.pack_name, LeasePack.lease_id, names, lease_timeout, excluding
    )


def live_leased(
    session: Session, hashes: Iterable[str], lease_timeout: float, excluding: str | None = None
) -> set[str]:
    """The subset of ``hashes`` named by a lease (other than ``excluding``) that is alive."""
    return _named_by_live_leases(
        session, LeaseBlob.sha256, LeaseBlob.lease_id, hashes, lease_timeout, excluding
    )


def _named_by_live_leases(
    session: Session,
    name: InstrumentedAttribute[str],
    lease_id: InstrumentedAttribute[str],
    names: Iterable[str],
    lease_timeout: float,
    excluding: str | None,
) -> set[str]:
    """Which of ``names`` (values of ``name``) a live lease other than ``excluding`` holds."""
    cutoff = datetime.now(UTC) - timedelta(seconds=lease_timeout)
    found: set[str] = set()
    for chunk in in_chunks(list(set(names))):
        query = (
            select(name)
            .join(UploadLease, UploadLease.id == lease_id)
            .where(name.in_(chunk))
            .where(UploadLease.heartbeat_at >= cutoff)
        )
        if excluding is not None:
            query = query.where(UploadLease.id != excluding)
        found.update(session.scalars(query))
    return found


def holder_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Lease:
    """A live upload lease, heartbeated from a daemon thread until released."""

    def __init__(
        self, sessions: sessionmaker[Session], lease_timeout: float, holder: str = ""
    ) -> None:
        self._sessions = sessions
        self._timeout = lease_timeout
        self._interval = max(0.5, lease_timeout / 4)
        self.id = str(uuid.uuid4())
        with transaction(sessions) as session:
            session.add(UploadLease(id=self.id, holder=holder or holder_name()))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease-{self.id[:8]}", daemon=True)
        self._thread.start()

    def add(self, session: Session, hashes: Iterable[str]) -> None:
        """Name blobs in this lease (``PushStalled`` once the lease went stale)."""
        self._require_alive(session)
        insert_ignore(
            session,
            LeaseBlob.__table__,
            [{"lease_id": self.id, "sha256": h} for h in sorted(set(hashes))],
        )

    def add_packs(self, session: Session, names: Iterable[str]) -> None:
        """Name packs in this lease (``PushStalled`` once the lease went stale)."""
        self._require_alive(session)
        insert_ignore(
            session,
            LeasePack.__table__,
            [{"lease_id": self.id, "pack_name": n} for n in sorted(set(names))],
        )

    def _beat(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.beat()
            except Exception:  # a missed beat is retried; the lease only expires after several
                continue

    def beat(self) -> None:
        """Renew the heartbeat, unless the lease already went stale.

        Fencing: a stale lease stays dead. GC may have taken its blobs meanwhile, and a
        revived heartbeat would hide that from ``is_alive``.
        """
        with transaction(self._sessions) as session:
            now = datetime.now(UTC)
            session.execute(
                update(UploadLease)
                .where(UploadLease.id == self.id)
                .where(UploadLease.heartbeat_at >= now - timedelta(seconds=self._timeout))
                .values(heartbeat_at=now)
            )

    def fence(self, session: Session) -> None:
        """Start an indexing transaction: the shared GC lock, then proof GC took nothing.

        Raises ``PushStalled`` (503) when this lease went stale: the push's bytes may
        be gone, so nothing may be indexed.
        """
        lock_blobs_shared(session)
        self._require_alive(session)

    def _require_alive(self, session: Session) -> None:
        if not self.is_alive(session):
            raise PushStalled(
                "this upload stalled for longer than REGISTRY_LEASE_TIMEOUT "
                f"({self._timeout:g}s), so garbage collection may have taken part of it; "
                "nothing was indexed: send it again",
                retry_after=1,
            )

    def is_alive(self, session: Session) -> bool:
        """Whether GC has honoured this lease all along (call in the indexing transaction).

        True only if the lease row exists and its heartbeat is recent: heartbeats never
        revive a stale lease, so a live lease was never stale, and GC (which checks
        leases under the exclusive lock) has not collected anything it names.
        """
        cutoff = datetime.now(UTC) - timedelta(seconds=self._timeout)
        beat = session.scalar(select(UploadLease.heartbeat_at).where(UploadLease.id == self.id))
        return beat is not None and beat >= cutoff

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
