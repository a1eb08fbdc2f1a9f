"""BodyPace: the rates an upload body must keep (registry.http.pace), on made-up clocks."""

from __future__ import annotations

import pytest

from registry.http.pace import BodyLimits, BodyPace

KiB = 1024
LIMITS = BodyLimits(idle=60, min_rate=16 * KiB, window=60, average_rate=32 * KiB)


def run(pace: BodyPace, rate: float, seconds: float, step: float = 1.0, start: float = 0.0):
    """Feed ``rate`` bytes/s for ``seconds``, checking each ``step``; the first reason, if any."""
    t = start
    while t < start + seconds:
        t += step
        pace.heard(int(rate * step), t)
        if (reason := pace.check(t)) is not None:
            return t, reason
    return None


def test_an_honest_client_on_a_64_kib_link_is_never_cut():
    pace = BodyPace(LIMITS, declared=64 * KiB * 3600, now=0)
    assert run(pace, 64 * KiB, 3600) is None


def test_an_honest_client_survives_a_stall_shorter_than_the_idle_timeout():
    pace = BodyPace(LIMITS, declared=None, now=0)
    assert run(pace, 64 * KiB, 100) is None
    assert pace.check(140) is None  # 40 s without a byte
    assert run(pace, 64 * KiB, 100, start=140) is None


def test_one_byte_just_under_the_idle_timeout_is_too_slow():
    pace = BodyPace(LIMITS, declared=10**9, now=0)
    reasons = []
    for t in range(59, 600, 59):
        pace.heard(1, t)
        reasons.append((t, pace.check(t)))
    t, reason = next((t, r) for t, r in reasons if r is not None)
    assert t <= 2 * 60 and "REGISTRY_BODY_MIN_RATE" in reason


def test_nothing_at_all_is_the_idle_timeout():
    pace = BodyPace(LIMITS, declared=None, now=0)
    assert pace.check(59) is None
    assert "REGISTRY_BODY_IDLE_TIMEOUT" in (pace.check(60) or "")


def test_the_window_never_asks_for_more_than_the_announced_rest():
    """A 1000-byte body that sent 990 bytes at once owes 10 more in each window, not 16 KiB/s."""
    pace = BodyPace(BodyLimits(60, 16 * KiB, 10, 0), declared=1000, now=0)
    pace.heard(990, 1)
    assert pace.check(5) is None
    pace.heard(10, 9)
    assert pace.check(11) is None


def test_a_body_that_keeps_the_window_rate_but_not_the_average_meets_its_deadline():
    """20 KiB/s passes every window (16 KiB/s) but not the 32 KiB/s average: a 20 MiB body
    is cut at its deadline, the first window + 20 MiB / 32 KiB/s = 700 s, or sooner."""
    pace = BodyPace(LIMITS, declared=20 * 1024 * KiB, now=0)
    found = run(pace, 20 * KiB, 3600)
    assert found is not None
    t, reason = found
    assert t <= 60 + 20 * 1024 / 32 and "REGISTRY_BODY_DEADLINE_RATE" in reason


def test_time_the_registry_held_the_body_back_is_not_the_clients():
    pace = BodyPace(LIMITS, declared=None, now=0)
    assert run(pace, 64 * KiB, 30) is None
    pace.pause(30)
    for t in range(31, 1000, 5):  # fifteen minutes of the registry's own backlog
        assert pace.check(t) is None
    pace.resume(1000)
    assert pace.client_time(1000) == pytest.approx(30)
    assert run(pace, 64 * KiB, 120, start=1000) is None


@pytest.mark.parametrize("off", ["min_rate", "average_rate"])
def test_a_rate_set_to_zero_is_not_checked(off):
    limits = BodyLimits(**{**LIMITS.__dict__, off: 0, "idle": 1000})
    pace = BodyPace(limits, declared=None, now=0)
    found = run(pace, 20 * KiB if off == "average_rate" else 8 * KiB, 600)
    if off == "average_rate":
        assert found is None  # 20 KiB/s keeps the 16 KiB/s window
    else:
        assert found is not None and "DEADLINE" in found[1]  # 8 KiB/s fails the average only
