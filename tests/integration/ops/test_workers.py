"""``carton-registry serve --workers 2`` as real processes: metrics add up, deletes show at once.

Each test starts the command on SQLite + a folder store in its own data dir and
reads which worker answered each request from the access log (``pid``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.integration.ops.test_observability import metric
from tests.integration.pull.helpers import make_carton

SERVERS = ["uvicorn", "granian"]


@dataclass
class Served:
    url: str
    log: Path

    def pids(self, route: str, status: int | None = None) -> set[int]:
        """The worker pids that answered ``route`` (a route template) so far."""
        found = set()
        for line in self.log.read_text().splitlines():
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            if record.get("route") == route and status in (None, record["status"]):
                found.add(record["pid"])
        return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(params=SERVERS)
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    if request.param == "granian":
        pytest.importorskip("granian")
    port = _free_port()
    log = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REGISTRY_", "PROMETHEUS_"))}
    env.update(REGISTRY_DATA_DIR=str(tmp_path / "data"), REGISTRY_AUTH="off")
    command = [sys.executable, "-m", "registry.cli", "serve", "--port", str(port)]
    command += ["--workers", "2", "--server", request.param]
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/api/v1/stats", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield Served(url, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _until_both_workers(served: Served, method: str, path: str, route: str) -> int:
    """Send ``method path`` on fresh connections until two workers answered it; how many."""
    sent = 0
    while len(served.pids(route)) < 2:
        assert sent < 400, f"one worker answered all {sent} requests"
        with httpx.Client(base_url=served.url) as fresh:  # one connection, one worker
            assert fresh.request(method, path).status_code == 200
        sent += 1
        if sent % 10 == 0:
            time.sleep(0.1)  # let the logging threads write
    return sent


def test_metrics_add_up_across_workers(served: Served):
    sent = _until_both_workers(served, "GET", "/healthz", "/healthz")
    for _ in range(20):
        with httpx.Client(base_url=served.url) as fresh:
            assert fresh.get("/healthz").status_code == 200
    sent += 20
    # Whichever worker answers /metrics, it reports both workers' requests.
    deadline = time.monotonic() + 10
    while True:
        text = httpx.get(f"{served.url}/metrics").text
        counted = metric(
            text, "registry_http_requests_total", method="GET", route="/healthz", status="200"
        )
        if counted == sent or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert counted == sent
    assert len(served.pids("/healthz")) == 2


def test_a_delete_through_one_worker_404s_on_every_worker(served: Served):
    carton = make_carton({"w/big.bin": b"weights " * 20_000}, model_name="fleet")
    pushed = httpx.post(f"{served.url}/api/v1/cartons", content=carton).json()
    url = f"/cartons/{pushed['manifest_sha256']}.carton"
    # Both workers have served it, so both hold it in memory.
    _until_both_workers(served, "HEAD", url, "/cartons/{file}")
    deleted = httpx.delete(f"{served.url}/api/v1/models/fleet/versions/{pushed['version']}")
    assert deleted.status_code == 200
    for _ in range(40):
        with httpx.Client(base_url=served.url) as fresh:
            assert fresh.head(url).status_code == 404
            assert fresh.get(url).status_code == 404
    time.sleep(0.3)
    assert len(served.pids("/cartons/{file}", 404)) == 2  # both answered 404
