"""Failures mid-push: a SIGKILLed server process, and the S3 server going away."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from registry.db.tables import Blob, Carton, CartonFile, UploadLease, Version
from registry.services.context import RegistryContext
from registry.services.gc import collect_garbage
from registry.settings import Settings
from tests.helpers import row_counts, store_objects
from tests.integration.ops.helpers import make_carton, push

REPO = Path(__file__).resolve().parents[3]
SERVE = (
    "import os, uvicorn\n"
    "from registry.app import create_app\n"
    "uvicorn.run(create_app(), host='127.0.0.1', port=int(os.environ['PORT']),"
    " log_level='warning')\n"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def counts(ctx) -> dict[str, int]:
    return row_counts(ctx, Blob, Carton, CartonFile, Version)


def store_files(data: Path) -> list[Path]:
    """Published objects: whole blobs and sealed packs."""
    roots = [data / "blobs" / "sha256", data / "blobs" / "packs"]
    return [p for root in roots if root.is_dir() for p in root.rglob("*") if p.is_file()]


def test_push_killed_midway_leaves_nothing_visible_and_gc_cleans_up(tmp_path):
    data = tmp_path / "data"
    port = free_port()
    env = {
        **os.environ,
        "PORT": str(port),
        "REGISTRY_DATA_DIR": str(data),
        "REGISTRY_LEASE_TIMEOUT": "1s",
        "REGISTRY_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "PYTHONPATH": str(REPO),
    }
    for key in ("REGISTRY_DATABASE_URL", "REGISTRY_BLOB_STORE", "REGISTRY_AUTH"):
        env.pop(key, None)
    # 48 distinct 3 MiB members, stored: the server writes their chunks as the body
    # streams, sealing a 64 MiB pack at a time, so there is a window where packs are in
    # the store and the carton is not indexed.
    members = {f"w/part-{i:02d}.bin": os.urandom(3 * 1024 * 1024) for i in range(48)}
    body = make_carton(members, model_name="doomed", stored=True)

    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE], env=env, cwd=tmp_path, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.1)

        killed = threading.Event()

        def killer() -> None:
            while proc.poll() is None:
                if store_files(data):
                    proc.send_signal(signal.SIGKILL)
                    killed.set()
                    return
                time.sleep(0.002)

        watcher = threading.Thread(target=killer, daemon=True)
        watcher.start()

        def slow_body():
            view = memoryview(body)
            for start in range(0, len(view), 1024 * 1024):
                yield bytes(view[start : start + 1024 * 1024])

        with pytest.raises(httpx.HTTPError):
            httpx.post(
                f"http://127.0.0.1:{port}/api/v1/cartons",
                content=slow_body(),
                headers={"Content-Length": str(len(body))},
                timeout=60,
            )
        watcher.join(timeout=30)
        assert killed.is_set(), "the push finished before it could be killed"
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stderr:
            proc.stderr.close()

    partial = {p.name: p.stat().st_size for p in store_files(data)}
    assert 0 < sum(partial.values()) < len(members) * 3 * 1024 * 1024
    uploads = data / "uploads"
    assert not uploads.is_dir() or list(uploads.iterdir()) == []  # one pass: nothing spooled

    ctx = RegistryContext.open(Settings(data_dir=data, lease_timeout=1.0, migrate_on_start=False))
    try:
        assert counts(ctx)["cartons"] == 0 and counts(ctx)["versions"] == 0
        with ctx.sessions() as s:
            assert s.scalar(select(func.count()).select_from(UploadLease)) == 1  # dead, not gone

        time.sleep(1.2)  # the lease heartbeat is older than REGISTRY_LEASE_TIMEOUT=1s now
        report = collect_garbage(ctx, grace_seconds=0)
        assert report.leases_expired == 1
        assert report.packs.orphan_packs_deleted == len(partial)
        assert report.bytes_freed >= sum(partial.values())
        assert store_objects(ctx) == set()
        tmp = data / "blobs" / "tmp"
        assert not tmp.is_dir() or list(tmp.iterdir()) == []
        with ctx.sessions() as s:
            assert s.scalar(select(func.count()).select_from(UploadLease)) == 0
    finally:
        ctx.close()


@pytest.mark.parametrize("backend", ["postgres-s3"], indirect=True)
def test_s3_down_mid_push_gives_503_then_push_succeeds(
    ops_client, registry_ctx, backend, s3_server
):
    if not s3_server.can_restart:
        pytest.skip("an external S3 server cannot be stopped by the test")
    data = make_carton({"w/a.bin": os.urandom(200_000), "w/b.bin": b"b" * 5000}, model_name="s3")
    before = counts(registry_ctx)
    s3_server.stop()
    try:
        r = push(ops_client, data)
    finally:
        s3_server.start()
    assert r.status_code == 503, r.text
    assert "error" in r.json()
    assert counts(registry_ctx) == before
    assert ops_client.get("/api/v1/models/s3").status_code == 404

    again = push(ops_client, data)
    assert again.status_code == 201, again.text
    assert again.json()["version"] == 1
    assert ops_client.get("/api/v1/models/s3").status_code == 200
