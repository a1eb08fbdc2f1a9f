"""How fast an upload body must arrive, so a trickling client cannot hold a slot for long.

An idle timeout alone (``REGISTRY_BODY_IDLE_TIMEOUT``) is beaten by one byte sent just
before it runs out. Like Apache's ``RequestReadTimeout body=...,MinRate=``, a body must
also keep a rate:

- **window**: every ``REGISTRY_BODY_RATE_WINDOW`` (sliding) must bring
  ``REGISTRY_BODY_MIN_RATE`` bytes a second, or the rest of the announced body;
- **average**: after its first window, the body must average
  ``REGISTRY_BODY_DEADLINE_RATE`` since it began; so one that announces N bytes
  (``Content-Length``) has ``window + N / rate`` to arrive: a deadline that scales with it.

Time counts on the *client's* clock: it stops while the registry holds the body back
itself (its worker thread is behind), so a slow disk never makes a client too slow.
``BodyPace`` is the arithmetic (no clock of its own, so it is tested with made-up times);
``PaceWatchdog`` runs it on the event loop, a few checks per window.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

import anyio

from registry.settings import Settings


@dataclass(frozen=True)
class BodyLimits:
    idle: float
    min_rate: float  # bytes per second over each window; 0: off
    window: float
    average_rate: float  # bytes per second over the whole body, after its first window; 0: off

    @classmethod
    def from_settings(cls, settings: Settings) -> BodyLimits:
        return cls(
            settings.body_idle_timeout,
            settings.body_min_rate,
            settings.body_rate_window,
            settings.body_deadline_rate,
        )

    @property
    def tick(self) -> float:
        """Seconds between checks: a few per idle timeout and per window."""
        spans = [self.idle] + ([self.window] if self.min_rate or self.average_rate else [])
        return max(0.01, min(spans) / 4)


class BodyPace:
    """Whether a body arrives fast enough (module doc); times are the loop's clock."""

    def __init__(self, limits: BodyLimits, declared: int | None, now: float) -> None:
        self.limits = limits
        self.declared = declared
        self.received = 0
        self._start = now
        self._paused_total = 0.0
        self._paused_at: float | None = None
        self._last_heard = 0.0
        self._samples: deque[tuple[float, int]] = deque([(0.0, 0)])  # (client time, received)

    def client_time(self, now: float) -> float:
        """Seconds since the body began, less those the registry held it back."""
        held = self._paused_total + (now - self._paused_at if self._paused_at is not None else 0)
        return now - self._start - held

    def heard(self, size: int, now: float) -> None:
        self.received += size
        self._last_heard = self.client_time(now)

    def pause(self, now: float) -> None:
        """The registry stops reading the body (its own backlog): the client's clock stops."""
        if self._paused_at is None:
            self._paused_at = now

    def resume(self, now: float) -> None:
        if self._paused_at is not None:
            self._paused_total += now - self._paused_at
            self._paused_at = None

    def _owed(self, wanted: float, had: int) -> float:
        """``wanted`` bytes, but never more than the announced body still held after ``had``."""
        return wanted if self.declared is None else min(wanted, self.declared - had)

    def check(self, now: float) -> str | None:
        """Why the body must be cut off now, or None while it keeps pace."""
        limits, t = self.limits, self.client_time(now)
        if t - self._last_heard >= limits.idle:
            return (
                f"request body stalled: nothing received for {limits.idle:g} s "
                "(REGISTRY_BODY_IDLE_TIMEOUT)"
            )
        samples = self._samples
        if t > samples[-1][0]:  # not while held back: the client's clock stands still
            samples.append((t, self.received))
        while len(samples) > 2 and samples[1][0] <= t - limits.window:
            samples.popleft()
        since, had = samples[0]
        if limits.min_rate and since <= t - limits.window:
            got = self.received - had
            if got < self._owed(limits.min_rate * (t - since), had):
                return (
                    f"request body too slow: {got} bytes in the last {t - since:.3g} s, under "
                    f"REGISTRY_BODY_MIN_RATE ({limits.min_rate:g} bytes/s)"
                )
        owed_by_now = limits.average_rate * (t - limits.window)
        if limits.average_rate and owed_by_now > 0 and self.received < self._owed(owed_by_now, 0):
            return (
                f"request body too slow: {self.received} bytes in {t:.3g} s, under "
                f"REGISTRY_BODY_DEADLINE_RATE ({limits.average_rate:g} bytes/s on average "
                f"after the first {limits.window:g} s)"
            )
        return None


class PaceWatchdog:
    """Checks a ``BodyPace`` every ``limits.tick`` seconds on the event loop, from ``start``
    to ``stop`` (one timer per tick, not one per piece). Once the body falls behind,
    ``reason`` says why and the ``scope`` being awaited in, if any, is cancelled."""

    def __init__(self, limits: BodyLimits, declared: int | None) -> None:
        self._loop = asyncio.get_running_loop()
        self.pace = BodyPace(limits, declared, self._loop.time())
        self._tick = limits.tick
        self._timer: asyncio.TimerHandle | None = None
        self.scope: anyio.CancelScope | None = None
        self.reason: str | None = None

    def start(self) -> None:
        self._timer = self._loop.call_later(self._tick, self._check)

    def heard(self, size: int) -> None:
        self.pace.heard(size, self._loop.time())

    def pause(self) -> None:
        self.pace.pause(self._loop.time())

    def resume(self) -> None:
        self.pace.resume(self._loop.time())

    def _check(self) -> None:
        self.reason = self.pace.check(self._loop.time())
        if self.reason is None:
            self._timer = self._loop.call_later(self._tick, self._check)
            return
        self._timer = None
        if self.scope is not None:
            self.scope.cancel()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
