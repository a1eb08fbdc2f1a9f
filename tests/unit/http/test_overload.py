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


def test_one_client_holds_at_most_its_share_and_others_keep_their_slots() -> None:
    """Four slots, two per client: a client with six uploads runs two, the rest wait for
    its own to end (then 503 naming the per-client setting), never taking a third slot;
    another client's uploads start at once meanwhile."""
    gate = IngestGate(slots=4, queue_timeout=0.3, per_client=2)
    outcomes: list[tuple[str, str]] = []
    started: dict[str, float] = {}

    async def ingest(client: str, hold: float) -> None:
        try:
            async with gate.slot(client):
                started.setdefault(client, anyio.current_time())
                outcomes.append((client, "ran"))
                await anyio.sleep(hold)
        except Overloaded as exc:
            assert "REGISTRY_MAX_CONCURRENT_PUSHES_PER_CLIENT" in str(exc)
            assert exc.retry_after == 1
            outcomes.append((client, "overloaded"))

    async def main() -> float:
        begin = anyio.current_time()
        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(ingest, "hostile", 1.0)
            await anyio.sleep(0.05)
            for _ in range(2):
                tg.start_soon(ingest, "honest", 0)
        return begin

    begin = anyio.run(main)
    assert sorted(outcomes) == sorted(
        [("hostile", "ran")] * 2 + [("hostile", "overloaded")] * 4 + [("honest", "ran")] * 2
    )
    assert started["honest"] - begin < 0.3  # never queued behind the hostile client
    assert gate._clients == {}  # nothing kept once a client has no upload left


def test_without_a_per_client_limit_one_client_may_take_every_slot() -> None:
    gate = IngestGate(slots=2, queue_timeout=0.2, per_client=0)
    ran: list[str] = []

    async def ingest() -> None:
        async with gate.slot("one"):
            ran.append("ran")
            await anyio.sleep(0.05)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ingest)
            tg.start_soon(ingest)

    anyio.run(main)
    assert ran == ["ran", "ran"]


def fake_request(auth: str, token: str | None, host: str) -> object:
    from types import SimpleNamespace

    headers = {"authorization": f"Bearer {token}"} if token else {}
    settings = SimpleNamespace(auth=auth)
    return SimpleNamespace(
        headers=headers,
        client=SimpleNamespace(host=host),
        app=SimpleNamespace(state=SimpleNamespace(ctx=SimpleNamespace(settings=settings))),
    )


def test_a_client_is_its_token_when_tokens_are_checked_else_its_address() -> None:
    from registry.http.overload import ingest_client

    one, other = (
        fake_request("write", "crt_a", "10.0.0.1"),
        fake_request("write", "crt_b", "10.0.0.1"),
    )
    assert ingest_client(one) != ingest_client(other)  # type: ignore[arg-type]
    assert "crt_a" not in ingest_client(one)  # type: ignore[arg-type]
    assert ingest_client(fake_request("write", "crt_a", "10.0.0.2")) == ingest_client(one)  # type: ignore[arg-type]
    # unchecked tokens could be made up per request: anonymous clients are their address
    made_up = [fake_request("off", f"crt_{i}", "10.0.0.3") for i in range(3)]
    assert len({ingest_client(r) for r in made_up}) == 1  # type: ignore[arg-type]
    assert ingest_client(fake_request("off", None, "10.0.0.4")) != ingest_client(made_up[0])  # type: ignore[arg-type]
