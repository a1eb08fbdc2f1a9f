"""Large upload bodies read from their connection by the consuming thread
(``registry.http.body_socket``), against a real server on 127.0.0.1 on every backend pair:
what arrives whole is stored and counted, what is cut short, stalls or is bad stores
nothing and is answered as through ASGI, and ``Expect: 100-continue`` is honoured."""

from __future__ import annotations

import json
import os
import socket
import time

import httpx
import pytest

from registry.http import body_socket
from tests.helpers import make_carton, pushes_settled
from tests.integration.api.test_push import counts
from tests.integration.hardening.test_hostile_clients import answer_of
from tests.integration.ops.test_observability import metric

THRESHOLD = 64 * 1024  # bodies from here on are read from the socket (serve's: 8 MiB)
IDLE = 1.0  # the server's body idle timeout in the stall test


@pytest.fixture(autouse=True)
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(body_socket, "DIRECT_BODY_MIN_BYTES", THRESHOLD)


def large_carton(name: str = "direct") -> bytes:
    carton = make_carton({"w.bin": os.urandom(3 * 1024 * 1024)}, model_name=name, stored=True)
    assert len(carton) >= THRESHOLD
    return carton


def request_head(length: int, *extra: str) -> bytes:
    lines = ["POST /api/v1/cartons HTTP/1.1", "Host: x", f"Content-Length: {length}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response (status, headers, body) read to the end of the connection."""
    head, _, body = answer_of(sock).partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


def test_a_large_push_is_read_from_its_socket_and_counted(live_server):
    received = "registry_http_received_bytes_total"
    labels = {"method": "POST", "route": "/api/v1/cartons"}
    with httpx.Client(base_url=live_server.url, timeout=60) as client:
        before = metric(client.get("/metrics").text, received, **labels)
        carton = large_carton()
        response = client.post("/api/v1/cartons", content=carton)
        assert response.status_code == 201, response.text
        assert response.headers["connection"] == "close"  # its parser never saw the body
        pushed = response.json()
        full = client.get(f"/cartons/{pushed['manifest_sha256']}.carton", params={"form": "full"})
        assert full.status_code == 200
        after = metric(client.get("/metrics").text, received, **labels)
    assert after - before == len(carton)
    assert counts(live_server.ctx)["cartons"] == 1


def test_a_body_below_the_threshold_keeps_its_connection(live_server):
    carton = make_carton({"w.bin": b"small"}, model_name="small", stored=True)
    assert len(carton) < THRESHOLD
    with httpx.Client(base_url=live_server.url, timeout=60) as client:
        response = client.post("/api/v1/cartons", content=carton)
    assert response.status_code == 201, response.text
    assert "connection" not in response.headers


def test_expect_100_continue_is_answered_before_the_body(live_server):
    carton = large_carton()
    with socket.create_connection(("127.0.0.1", live_server.port), timeout=30) as sock:
        sock.sendall(request_head(len(carton), "Expect: 100-continue"))
        interim = sock.recv(65536)
        assert interim.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), interim
        sock.sendall(carton)
        status, headers, body = read_response(sock)
    assert status == 201, body
    assert headers["connection"] == "close"
    assert json.loads(body)["manifest_sha256"]


def test_a_body_cut_short_stores_nothing(live_server):
    carton = large_carton()
    before = counts(live_server.ctx)
    with socket.create_connection(("127.0.0.1", live_server.port), timeout=30) as sock:
        sock.sendall(request_head(len(carton)) + carton[: len(carton) // 2])
        time.sleep(0.2)  # the server is reading the body from the socket by now
    pushes_settled(live_server.ctx)
    assert counts(live_server.ctx) == before
    assert httpx.get(live_server.url + "/healthz", timeout=10).status_code == 200


@pytest.mark.settings(body_idle_timeout=IDLE)
def test_a_stalled_body_is_cut_off_with_a_json_error(live_server):
    carton = large_carton()
    before = counts(live_server.ctx)
    with socket.create_connection(("127.0.0.1", live_server.port), timeout=IDLE + 30) as sock:
        started = time.monotonic()
        sock.sendall(request_head(len(carton)) + carton[: len(carton) // 2])  # then nothing
        status, headers, body = read_response(sock)
        waited = time.monotonic() - started
    assert status == 408, body
    assert "stalled" in json.loads(body)["error"]
    assert headers["connection"] == "close"
    assert waited >= IDLE
    pushes_settled(live_server.ctx)
    assert counts(live_server.ctx) == before


def test_a_bad_body_gets_a_json_error_and_stores_nothing(live_server):
    garbage = os.urandom(2 * 1024 * 1024)  # no zip at all
    before = counts(live_server.ctx)
    with httpx.Client(base_url=live_server.url, timeout=60) as client:
        response = client.post("/api/v1/cartons", content=garbage)
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["error"]
    pushes_settled(live_server.ctx)
    assert counts(live_server.ctx) == before
