"""The scrub: re-read every live pack at a bounded rate, so bit rot is found before a user is.

``scrub_pass`` reads each live pack front to back through the verified reader
(``chunkstore.verified``), the one that guards every download, at most
``rate`` bytes per second; what it finds is recorded like a failed read
(``damaged_chunks``, logs, ``registry_damaged_chunks_total{found_by="scrub"}``),
so negotiation asks for those bytes again and the next push holding them heals
them. A damaged chunk does not stop the pass: it goes on at the next chunk.

``Scrubber`` runs passes in a daemon thread of a server process while
``REGISTRY_SCRUB_RATE`` is set (off by default), pausing between passes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select

from registry.db.tables import Pack
from registry.services.chunkstore.reader import PackRange, StoredFile
from registry.services.chunkstore.verified import TABLES, DamagedRead, iter_verified
from registry.services.context import RegistryContext

log = logging.getLogger("registry.scrub")

PASS_PAUSE = 3600.0
"""Seconds between the end of one pass and the start of the next."""


@dataclass
class ScrubReport:
    packs: int = 0
    bytes: int = 0
    damaged: int = 0  # chunks (or lost packs) the pass met
    seconds: float = 0.0


def _live_packs(ctx: RegistryContext) -> list[tuple[str, int]]:
    with ctx.sessions() as session:
        rows = session.execute(
            select(Pack.name, Pack.size).where(Pack.retired_at.is_(None)).order_by(Pack.id)
        ).all()
        session.rollback()
    return [(r.name, int(r.size)) for r in rows]


class _Pace:
    """Waits so that the bytes handed to ``spent`` average at most ``rate`` per second."""

    def __init__(
        self, rate: int, wait: Callable[[float], object], clock: Callable[[], float]
    ) -> None:
        self.rate, self.wait, self.clock = rate, wait, clock
        self.started = clock()
        self.done = 0

    def spent(self, n: int) -> None:
        self.done += n
        ahead = self.done / self.rate - (self.clock() - self.started)
        if ahead > 0:
            self.wait(ahead)


def scrub_pass(
    ctx: RegistryContext,
    rate: int,
    *,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ScrubReport:
    """Check every live pack once at ``rate`` bytes per second (module doc); ``stop``
    ends the pass early (its wait is the pause between reads, so setting it is prompt)."""
    if rate <= 0:
        raise ValueError("a scrub needs a rate above 0 bytes per second")
    stop = stop or threading.Event()
    report = ScrubReport()
    pace = _Pace(rate, stop.wait, clock)
    for name, size in _live_packs(ctx):
        if stop.is_set():
            break
        report.packs += 1
        start = 0
        while start < size and not stop.is_set():
            whole = StoredFile(f"pack {name}", size, None, (PackRange(name, 0, 0, size),))
            try:
                for data in iter_verified(ctx, whole, start, size, found_by="scrub"):
                    report.bytes += len(data)
                    start += len(data)
                    pace.spent(len(data))
                    if stop.is_set():
                        break
            except DamagedRead as exc:
                report.damaged += 1
                table = TABLES.get(ctx, [name]).get(name)
                if exc.idx is None or table is None:
                    break  # the pack is gone: every chunk of it is recorded
                start = table.starts[exc.idx + 1]
    report.seconds = clock() - pace.started
    log.info(
        "scrub: %d packs, %d bytes checked in %.1fs, %d damaged",
        report.packs,
        report.bytes,
        report.seconds,
        report.damaged,
    )
    return report


class Scrubber:
    """Scrub passes in a daemon thread, ``PASS_PAUSE`` apart, until ``close``."""

    def __init__(self, ctx: RegistryContext, rate: int, pause: float = PASS_PAUSE) -> None:
        self.ctx, self.rate, self.pause = ctx, rate, pause
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scrub", daemon=True)
        self.passes = 0

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                scrub_pass(self.ctx, self.rate, stop=self._stop)
                self.passes += 1
            except Exception:  # the database or store is down: try again next time
                log.exception("scrub pass failed")
            self._stop.wait(self.pause)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
