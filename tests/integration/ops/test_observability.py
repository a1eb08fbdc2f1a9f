"""/metrics, request ids and access logs; compose.yaml and the Dockerfile; serve's bind check."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
import yaml

from registry.services.gc import collect_garbage
from tests.conftest import bound_socket
from tests.integration.ops.helpers import make_carton, push

REPO = Path(__file__).resolve().parents[3]


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in a Prometheus text exposition (0 when absent)."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split(" ")[0]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_metrics_count_requests_bytes_pushes_and_gc(ops_client, registry_ctx):
    before = ops_client.get("/metrics").text
    body = make_carton({"w": b"metrics " * 100})
    assert push(ops_client, body).status_code == 201
    assert push(ops_client, body).status_code == 200
    assert ops_client.get("/api/v1/models").status_code == 200
    collect_garbage(registry_ctx, grace_seconds=0)
    response = ops_client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    after = response.text

    route = "/api/v1/cartons"
    for status, n in (("201", 1), ("200", 1)):
        assert (
            metric(after, "registry_http_requests_total", method="POST", route=route, status=status)
            - metric(
                before, "registry_http_requests_total", method="POST", route=route, status=status
            )
            == n
        )
    assert (
        metric(
            after,
            "registry_http_requests_total",
            method="GET",
            route="/api/v1/models",
            status="200",
        )
        >= 1
    )
    received = metric(after, "registry_http_received_bytes_total", method="POST", route=route)
    assert received - metric(
        before, "registry_http_received_bytes_total", method="POST", route=route
    ) == 2 * len(body)
    assert metric(after, "registry_http_sent_bytes_total", method="GET", route="/api/v1/models") > 0
    assert "registry_http_request_duration_seconds_bucket" in after
    assert metric(after, "registry_gc_runs_total", outcome="ok") >= 1
    assert "registry_gc_bytes_freed_total" in after
    # Every push is observed by the ingest service: one new, one already known.
    for outcome in ("created", "existing"):
        assert (
            metric(after, "registry_pushes_total", outcome=outcome)
            - metric(before, "registry_pushes_total", outcome=outcome)
            == 1
        )
    assert metric(after, "registry_push_bytes_total", kind="deduplicated") - metric(
        before, "registry_push_bytes_total", kind="deduplicated"
    ) >= len(b"metrics " * 100)
    assert (
        metric(after, "registry_ingest_duration_seconds_count")
        - metric(before, "registry_ingest_duration_seconds_count")
        == 2
    )


def test_request_id_round_trip_and_json_access_log(ops_client, caplog):
    with caplog.at_level(logging.INFO, logger="registry.access"):
        r = ops_client.get("/healthz", headers={"X-Request-ID": "abc-123"})
        generated = ops_client.get("/api/v1/models")
        hostile = ops_client.get("/healthz", headers={"X-Request-ID": "bad id\twith spaces"})
    assert r.headers["x-request-id"] == "abc-123"
    assert re.fullmatch(r"[0-9a-f]{32}", generated.headers["x-request-id"])
    assert hostile.headers["x-request-id"] != "bad id\twith spaces"
    records = [
        json.loads(rec.getMessage()) for rec in caplog.records if rec.name == "registry.access"
    ]
    mine = next(rec for rec in records if rec["request_id"] == "abc-123")
    assert mine["method"] == "GET" and mine["path"] == "/healthz" and mine["status"] == 200
    assert mine["bytes"] == len(r.content) and mine["duration_ms"] >= 0
    assert any(rec["request_id"] == generated.headers["x-request-id"] for rec in records)


def test_compose_file():
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    services = compose["services"]
    assert {"postgres", "minio", "createbucket", "registry"} <= set(services)
    for name in ("postgres", "minio", "registry"):
        assert "test" in services[name]["healthcheck"], name
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])

    registry = services["registry"]
    env = registry["environment"]
    assert env["REGISTRY_AUTH"] == "write"
    assert env["REGISTRY_DATABASE_URL"].startswith("postgresql://")
    assert env["REGISTRY_BLOB_STORE"].startswith("s3://")
    assert env["REGISTRY_S3_ENDPOINT_URL"] == "http://minio:9000"
    assert env["REGISTRY_PUBLIC_URL"].startswith("http")
    assert env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY")
    assert "REGISTRY_ALLOW_INSECURE_BIND" not in env
    bucket = env["REGISTRY_BLOB_STORE"].removeprefix("s3://").split("/")[0]
    assert bucket in " ".join(services["createbucket"]["entrypoint"]) + json.dumps(
        services["createbucket"].get("command", "")
    )
    depends = registry["depends_on"]
    assert depends["postgres"]["condition"] == "service_healthy"
    assert depends["minio"]["condition"] == "service_healthy"
    assert depends["createbucket"]["condition"] == "service_completed_successfully"
    assert services["createbucket"]["depends_on"]["minio"]["condition"] == "service_healthy"
    assert registry["build"] in (".", {"context": "."}) or registry["build"]["context"] == "."
    command = (
        " ".join(registry["command"])
        if isinstance(registry["command"], list)
        else registry["command"]
    )
    assert "serve" in command and "0.0.0.0" in command and "8080" in command
    assert "/healthz?ready=1" in json.dumps(registry["healthcheck"]["test"])
    assert any("8080" in str(p) for p in registry["ports"])
    # credentials line up: the registry's database user and password are Postgres's
    pg_env = services["postgres"]["environment"]
    assert (
        f"{pg_env['POSTGRES_USER']}:{pg_env['POSTGRES_PASSWORD']}@postgres"
        in env["REGISTRY_DATABASE_URL"]
    )
    minio_env = services["minio"]["environment"]
    assert env["AWS_ACCESS_KEY_ID"] == minio_env["MINIO_ROOT_USER"]
    assert env["AWS_SECRET_ACCESS_KEY"] == minio_env["MINIO_ROOT_PASSWORD"]


def test_dockerfile():
    text = (REPO / "Dockerfile").read_text()
    assert text.startswith("FROM python:3.11-slim") or "FROM python:3.11-slim" in text
    assert "pip install" in text and "USER " in text and "EXPOSE 8080" in text
    ignore = (REPO / ".dockerignore").read_text().split()
    assert ".venv" in ignore and "data" in ignore


def test_serve_refuses_auth_off_on_public_address(monkeypatch, tmp_path, capsys):
    cli = pytest.importorskip("registry.cli")
    monkeypatch.setenv("REGISTRY_DATA_DIR", str(tmp_path / "data"))
    for name in (
        "REGISTRY_AUTH",
        "REGISTRY_ALLOW_INSECURE_BIND",
        "REGISTRY_DATABASE_URL",
        "REGISTRY_BLOB_STORE",
    ):
        monkeypatch.delenv(name, raising=False)
    import uvicorn

    started: list[dict] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: started.append(kw))
    # A port free now: serve checks it is not in use, and this machine may run a registry
    # on 18080 (a fixed port failed the test whenever another process held it).
    with bound_socket() as sock:
        port = str(sock.getsockname()[1])

    assert cli.main(["serve", "--host", "0.0.0.0", "--port", port]) != 0
    assert "REGISTRY_AUTH" in capsys.readouterr().err
    assert started == []

    monkeypatch.setenv("REGISTRY_AUTH", "write")
    assert cli.main(["serve", "--host", "0.0.0.0", "--port", port]) == 0
    assert started and started[-1]["host"] == "0.0.0.0"

    monkeypatch.setenv("REGISTRY_AUTH", "off")
    monkeypatch.setenv("REGISTRY_ALLOW_INSECURE_BIND", "true")
    assert cli.main(["serve", "--host", "0.0.0.0", "--port", port]) == 0
    assert cli.main(["serve", "--host", "127.0.0.1", "--port", port]) == 0
