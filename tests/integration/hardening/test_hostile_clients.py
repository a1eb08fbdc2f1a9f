"""Hostile clients (issue 24), against a real server on every backend pair: trickling
bodies are cut while another client keeps pushing, and a client that goes away mid-body
is logged and counted as a client abort (499), never a 5xx.

Small test-only settings (a 1 s rate window) keep each test to a few seconds."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from registry.services.auth import create_token
from tests.helpers import make_carton, sha
from tests.integration.hardening.test_slow_clients import trickle

KiB = 1024
HOSTILE = 8  # trickling uploads from one token
WINDOW = 1.0  # the server's rate window in these tests
QUEUE = 3.0  # its ingest queue timeout
SLACK = 10.0  # how much later than its settings say a connection may close on a busy machine


def answer_of(sock: socket.socket) -> bytes:
    """What the server sends until it closes the connection (``b""`` if it says nothing)."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer else 0


@pytest.mark.settings(
    auth="write",
    max_concurrent_pushes=2,
    max_concurrent_pushes_per_client=1,
    ingest_queue_timeout=QUEUE,
    body_rate_window=WINDOW,
    body_min_rate=4 * KiB,
    body_deadline_rate=4 * KiB,
)
def test_trickling_uploads_are_cut_and_another_client_keeps_pushing(live_server):
    """Eight uploads from one token send a byte every 0.2 s: an idle timeout (60 s) would
    never cut them. The token holds one of the two slots at a time, each is cut for its
    rate within a window or two (408) or, still waiting for the token's own slot, gives
    up (503); meanwhile another token's pushes go straight through."""
    ctx = live_server.ctx
    hostile, _ = create_token(ctx, "hostile", "push")
    honest, _ = create_token(ctx, "honest", "push")
    body = make_carton({"w.bin": b"w" * 4000}, model_name="trickled")
    request = (
        b"POST /api/v1/cartons HTTP/1.1\r\nHost: x\r\n"
        + f"Authorization: Bearer {hostile}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    )
    stop = threading.Event()
    sockets, threads = [], []
    started = time.monotonic()
    for _ in range(HOSTILE):
        sock = socket.create_connection(("127.0.0.1", live_server.port), timeout=QUEUE + SLACK)
        sock.sendall(request)
        thread = threading.Thread(target=trickle, args=(sock, body, 0.2, stop))
        thread.start()
        sockets.append(sock)
        threads.append(thread)
    try:
        time.sleep(0.5)  # the hostile uploads hold what they can get
        pushes = []
        with httpx.Client(base_url=live_server.url, timeout=30) as client:
            for i in range(3):
                carton = make_carton({"w.bin": f"honest {i}".encode() * 100}, model_name="honest")
                pushes.append(
                    client.post(
                        "/api/v1/cartons",
                        content=carton,
                        headers={"Authorization": f"Bearer {honest}"},
                    )
                )
        honest_done = time.monotonic() - started
        answers = [answer_of(sock) for sock in sockets]
        closed = time.monotonic() - started
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        for sock in sockets:
            sock.close()
    assert [p.status_code for p in pushes] == [201, 201, 201], [p.text for p in pushes]
    assert honest_done < QUEUE, f"the honest pushes waited {honest_done:.1f} s for a slot"
    statuses = sorted(status_of(a) for a in answers)
    assert set(statuses) <= {408, 503}, answers
    assert 408 in statuses  # cut for their rate, not merely queued out
    for answer in answers:
        if status_of(answer) == 408:
            assert b"REGISTRY_BODY_MIN_RATE" in answer or b"REGISTRY_BODY_DEADLINE" in answer
        else:  # waited out for the token's own slot, or (holding it) for a global one
            assert b"REGISTRY_MAX_CONCURRENT_PUSHES" in answer
    assert closed < HOSTILE * 2 * WINDOW + QUEUE + SLACK  # nobody trickles on for long


def requests_by_status(live_server, route: str) -> dict[str, float]:
    """``registry_http_requests_total`` of ``route``, by status, from ``/metrics``."""
    text = httpx.get(f"{live_server.url}/metrics", timeout=10).text
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "registry_http_requests":
            for sample in family.samples:
                if sample.name.endswith("_total") and sample.labels["route"] == route:
                    status = sample.labels["status"]
                    counts[status] = counts.get(status, 0) + sample.value
    return counts


def carton_start() -> bytes:
    """The start of a valid carton with a large stored member: the server reads on."""
    big = make_carton({"w.bin": bytes(range(256)) * 4096}, model_name="gone", stored=True)
    return big[:5000]


def chunk_records_start() -> bytes:
    """A chunk upload's first record header and part of its chunk."""
    return bytes(32) + (200 * KiB).to_bytes(4, "big") + b"c" * 5000


ABANDONED = [
    ("POST", "/api/v1/cartons", "/api/v1/cartons", carton_start),
    ("POST", "/api/v1/chunks", "/api/v1/chunks", chunk_records_start),
    (
        "PUT",
        f"/api/v1/blobs/{sha(b'never sent')}",
        "/api/v1/blobs/{sha256}",
        lambda: b"b" * 5000,
    ),
    (
        "POST",
        "/v2/repository/models/gone/load",
        "/v2/repository/models/{name}/load",
        lambda: b'{"parameters": {"config": "' + b"x" * 5000,
    ),
]


# Ids by method and route only: a function's repr holds its address, which differs between
# pytest-xdist workers, and they must collect the same tests.
@pytest.mark.parametrize(
    ("method", "path", "route", "start"), ABANDONED, ids=[f"{m} {r}" for m, _, r, _ in ABANDONED]
)
def test_a_client_gone_mid_body_is_a_499_in_logs_and_metrics(
    live_server, caplog, method, path, route, start
):
    caplog.set_level(logging.INFO, logger="registry.access")
    before = requests_by_status(live_server, route)
    sock = socket.create_connection(("127.0.0.1", live_server.port), timeout=10)
    sock.sendall(
        f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n".encode() + start()
    )
    time.sleep(0.3)  # the server is reading the body
    sock.close()
    deadline = time.monotonic() + 10
    while True:
        after = requests_by_status(live_server, route)
        if after.get("499", 0) > before.get("499", 0) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert after.get("499", 0) == before.get("499", 0) + 1, after
    fives = {s: n for s, n in after.items() if s.startswith("5") and n != before.get(s, 0)}
    assert not fives, f"counted as server errors: {fives}"
    logged = [
        r.access
        for r in caplog.records
        if getattr(r, "access", None) and r.access["path"] == path  # type: ignore[attr-defined]
    ]
    assert [r["status"] for r in logged] == [499], json.dumps(logged)
