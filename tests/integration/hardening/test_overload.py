"""Overload (issue 12), on every backend pair: concurrent pushes queue and then answer 503
with Retry-After, never 500; lock timeouts are 503; reads stay responsive meanwhile."""

from __future__ import annotations

import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from registry.db.engine import WRITE_OPTION, is_sqlite, make_engine
from registry.errors import Overloaded, StorageUnavailable
from registry.services import stats
from registry.services.database_errors import as_registry_error
from tests.helpers import make_carton
from tests.integration.hardening.memory import MiB, peak_rss

PUSHES = 16
MEMBERS = 200
STATS_LATENCY_BOUND = 3.0  # seconds, the slowest GET /api/v1/stats during the flood
MEMORY_BOUND = 400 * MiB  # growth of the process (server and clients) during the flood


def a_real_lock_timeout(registry_ctx) -> OperationalError:
    """The OperationalError the backend's own driver raises when a lock wait runs out."""
    url = registry_ctx.settings.database_url
    holder, waiter = make_engine(url), make_engine(url)
    try:
        with holder.connect() as held, waiter.connect() as conn:
            if is_sqlite(url):
                held.execution_options(**{WRITE_OPTION: True}).begin()  # BEGIN IMMEDIATE
                conn.exec_driver_sql("PRAGMA busy_timeout=50")
                conn.commit()
                with pytest.raises(OperationalError) as caught:
                    conn.execution_options(**{WRITE_OPTION: True}).begin()
            else:
                held.execute(text("LOCK TABLE models IN ACCESS EXCLUSIVE MODE"))
                conn.execute(text("SET lock_timeout = '50ms'"))
                with pytest.raises(OperationalError) as caught:
                    conn.execute(text("SELECT count(*) FROM models"))
            held.rollback()
    finally:
        holder.dispose()
        waiter.dispose()
    return caught.value


def test_a_lock_timeout_answers_503_with_retry_after(registry_ctx, client, monkeypatch):
    error = a_real_lock_timeout(registry_ctx)
    assert isinstance(as_registry_error(error), Overloaded)

    def locked(*args, **kwargs):
        raise error

    monkeypatch.setattr(stats, "get_stats", locked)
    response = client.get("/api/v1/stats")
    assert response.status_code == 503
    assert int(response.headers["retry-after"]) >= 1
    assert "busy" in response.json()["error"]


def test_an_unreachable_database_is_503_too():
    down = OperationalError("SELECT 1", {}, ConnectionRefusedError("connection refused"))
    assert isinstance(as_registry_error(down), StorageUnavailable)
    assert as_registry_error(down).retry_after


def many_member_carton(i: int) -> bytes:
    files = {f"weights/part-{j:04d}.bin": f"{i}:{j}".encode() * 8 for j in range(MEMBERS)}
    return make_carton(files, model_name=f"flood-{i}")


@pytest.mark.settings(max_concurrent_pushes=2, ingest_queue_timeout=0.5)
def test_a_push_flood_queues_then_503s_and_reads_stay_fast(live_server):
    cartons = [many_member_carton(i) for i in range(PUSHES)]
    done = threading.Event()
    latencies: list[float] = []

    def read_while_pushing() -> None:
        with httpx.Client(base_url=live_server.url, timeout=30) as client:
            while not done.is_set():
                started = time.monotonic()
                assert client.get("/api/v1/stats").status_code == 200
                assert client.get("/healthz").status_code == 200
                latencies.append(time.monotonic() - started)
                time.sleep(0.05)

    def push(body: bytes) -> httpx.Response:
        return httpx.post(f"{live_server.url}/api/v1/cartons", content=body, timeout=120)

    reader = threading.Thread(target=read_while_pushing)
    with peak_rss() as memory:
        reader.start()
        with ThreadPoolExecutor(PUSHES) as pool:
            responses = list(pool.map(push, cartons))
        done.set()
        reader.join()
    statuses = sorted(r.status_code for r in responses)
    assert set(statuses) <= {201, 503}, [r.text for r in responses if r.status_code >= 500]
    assert 201 in statuses and 503 in statuses  # some ran, the rest queued, then left
    for response in responses:
        if response.status_code == 503:
            assert int(response.headers["retry-after"]) >= 1
            assert "retry later" in response.json()["error"]
    assert latencies and max(latencies) < STATS_LATENCY_BOUND, (
        f"stats+healthz: median {statistics.median(latencies):.3f}s, max {max(latencies):.3f}s"
    )
    assert memory.growth < MEMORY_BOUND, f"RSS grew {memory.growth / MiB:.0f} MiB"
    # what was refused can be pushed again once the flood is over (one of them: each
    # push is 200 blobs, which on moto's S3 takes seconds)
    refused = next(b for b, r in zip(cartons, responses, strict=True) if r.status_code == 503)
    assert push(refused).status_code == 201
