"""The ingest gate: a bounded number of slots, a brief queue, then Overloaded."""

from __future__ import annotations

import anyio
import pytest

from registry.errors import Overloaded
from registry.http.overload import IngestGate


def test_slots_queue_briefly_then_overloaded_with_retry_after() -> None:
    gate = IngestGate(slots=2, queue_timeout=0.2)
    outcomes: list[str] = []

    async def ingest(hold: float) -> None:
        try:
            async with gate.slot() as limiter:
                assert limiter is gate.limiter
                await anyio.sleep(hold)
                outcomes.append("ran")
        except Overloaded as exc:
            assert exc.retry_after == 1 and "REGISTRY_MAX_CONCURRENT_PUSHES" in str(exc)
            outcomes.append("overloaded")

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ingest, 1.0)
            tg.start_soon(ingest, 1.0)
            await anyio.sleep(0.05)
            tg.start_soon(ingest, 0)  # waits 0.2 s for a slot that frees after 1 s
        async with anyio.create_task_group() as tg:  # the slots were given back
            tg.start_soon(ingest, 0)
            tg.start_soon(ingest, 0)

    anyio.run(main)
    assert sorted(outcomes) == ["overloaded", "ran", "ran", "ran", "ran"]


def test_a_queued_ingest_gets_the_slot_that_frees() -> None:
    gate = IngestGate(slots=1, queue_timeout=5)
    order: list[str] = []

    async def ingest(name: str, hold: float) -> None:
        async with gate.slot():
            order.append(name)
            await anyio.sleep(hold)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ingest, "first", 0.2)
            await anyio.sleep(0.05)
            tg.start_soon(ingest, "second", 0)

    anyio.run(main)
    assert order == ["first", "second"]


def test_the_setting_must_allow_one_ingest() -> None:
    from registry.settings import Settings

    with pytest.raises(ValueError, match="MAX_CONCURRENT_PUSHES"):
        Settings(max_concurrent_pushes=0)
