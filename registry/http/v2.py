"""Triton / KServe v2 routes: thin controllers over registry.services.triton.

Each reads the request (bodies through ``registry.triton.requests``), hands the
work to a thread, and returns a ``registry.triton.documents`` struct.

Rules tritonclient depends on (spec/clients-observed.md): success is exactly
200; errors are ``{"error": "..."}``; request Content-Type is ignored (the sync
client sends none, the aio client sends application/octet-stream with JSON);
model names arrive percent-encoded UTF-8 and are decoded by the ASGI server.
"""

from __future__ import annotations

from functools import partial
from types import ModuleType
from typing import Any

import anyio
from litestar import MediaType, Request, Response, post

from registry.errors import InferenceElsewhere, InvalidRequest, StorageUnavailable
from registry.http.auth import require_push
from registry.http.deps import read_body
from registry.http.overload import IngestGate, ingest_client
from registry.http.routing import get
from registry.services.context import RegistryContext
from registry.services.names import parse_version, validate_model_name
from registry.services.triton import metadata, repository
from registry.triton.documents import (
    IndexEntry,
    ModelConfig,
    ModelMetadata,
    ModelVersions,
    SelfTestReport,
    ServerMetadata,
)
from registry.triton.requests import (
    parse_header_length,
    parse_index_body,
    parse_load_body,
    parse_unload_body,
)

SMALL_BODY = 1 << 20  # index / unload bodies: a few bytes of JSON

_MODEL = "/v2/models/{name:str}"
_MODEL_VERSION = "/v2/models/{name:str}/versions/{version:str}"


def _paths(suffix: str = "") -> list[str]:
    return [_MODEL + suffix, _MODEL_VERSION + suffix]


def _empty() -> Response:
    return Response(content=b"", status_code=200, media_type=MediaType.TEXT)


# --- server ---------------------------------------------------------------------------


@get("/v2", summary="Triton server metadata", tags=["v2"])
async def server_metadata() -> ServerMetadata:
    return metadata.server_metadata()


@get("/v2/health/live", summary="Triton liveness (200, empty body)", tags=["v2"])
async def health_live() -> Response:
    return _empty()


@get("/v2/health/ready", summary="Triton readiness: 200 when the database answers", tags=["v2"])
async def health_ready(ctx: RegistryContext) -> Response:
    if not await anyio.to_thread.run_sync(metadata.database_ready, ctx):
        raise StorageUnavailable("database unreachable")
    return _empty()


# --- repository extension -------------------------------------------------------------


@post("/v2/repository/index", status_code=200, summary="Every model version", tags=["v2"])
async def repository_index(request: Request, ctx: RegistryContext) -> list[IndexEntry]:
    ready_only = parse_index_body(await read_body(request, SMALL_BODY))
    return await anyio.to_thread.run_sync(
        partial(repository.repository_index, ctx, ready_only=ready_only)
    )


@post(
    "/v2/repository/models/{name:str}/load",
    guards=[require_push],
    status_code=200,
    summary="Load: with config + file:<version>/<path> parameters, store a new version "
    "(answers the push's body); without, re-verify and mark READY",
    tags=["v2"],
)
async def load_model(
    request: Request, ctx: RegistryContext, ingest_gate: IngestGate, name: str
) -> ModelVersions | dict[str, Any]:
    validate_model_name(name)  # before reading what may be a large body
    async with ingest_gate.slot(ingest_client(request)) as limiter:
        raw = await read_body(request, ctx.settings.max_v2_body_bytes)
        params = await anyio.to_thread.run_sync(parse_load_body, raw, limiter=limiter)
        del raw
        return await anyio.to_thread.run_sync(
            repository.load_model, ctx, name, params, limiter=limiter
        )


@post(
    "/v2/repository/models/{name:str}/unload",
    guards=[require_push],
    status_code=200,
    summary="Unload: every version UNAVAILABLE (reason 'unloaded'); nothing deleted",
    tags=["v2"],
)
async def unload_model(request: Request, ctx: RegistryContext, name: str) -> ModelVersions:
    validate_model_name(name)
    parse_unload_body(await read_body(request, SMALL_BODY))  # no model has dependents here
    return await anyio.to_thread.run_sync(repository.unload_model, ctx, name)


# --- models ---------------------------------------------------------------------------


@get(_paths(), summary="Model metadata from carton.toml", tags=["v2"])
async def model_metadata(
    ctx: RegistryContext, name: str, version: str | None = None
) -> ModelMetadata:
    number = parse_version(version)
    return await anyio.to_thread.run_sync(metadata.model_metadata, ctx, name, number)


@get(_paths("/config"), summary="A Triton-style model config from carton.toml", tags=["v2"])
async def model_config(ctx: RegistryContext, name: str, version: str | None = None) -> ModelConfig:
    number = parse_version(version)
    return await anyio.to_thread.run_sync(metadata.model_config, ctx, name, number)


@get(_paths("/ready"), summary="200 when READY, else 400", tags=["v2"])
async def model_ready(ctx: RegistryContext, name: str, version: str | None = None) -> Response:
    number = parse_version(version)
    await anyio.to_thread.run_sync(metadata.require_ready, ctx, name, number)
    return _empty()


@get(
    _paths("/self_tests/{index:int}"),
    summary="A ready-to-POST infer request for self test i (binary; ?format=json for JSON)",
    tags=["v2"],
)
async def self_test_request(
    ctx: RegistryContext,
    name: str,
    index: int,
    version: str | None = None,
    format: str = "binary",
) -> Response:
    if format not in ("binary", "json"):
        raise InvalidRequest(f"invalid format {format!r}: binary or json")
    number = parse_version(version)
    self_tests = _self_tests()
    body, header_length = await anyio.to_thread.run_sync(
        partial(self_tests.self_test_request, ctx, name, number, index, binary=format == "binary")
    )
    if header_length is None:
        return Response(content=body, status_code=200, media_type=MediaType.JSON)
    return Response(
        content=body,
        status_code=200,
        media_type="application/octet-stream",
        headers={"Inference-Header-Content-Length": str(header_length)},
    )


@post(
    _paths("/self_tests/{index:int}/verify"),
    status_code=200,
    summary="Compare an infer response (JSON or binary) with the self test's expected_out",
    tags=["v2"],
)
async def verify_self_test(
    request: Request, ctx: RegistryContext, name: str, index: int, version: str | None = None
) -> SelfTestReport:
    number = parse_version(version)
    header_length = parse_header_length(request.headers.get("inference-header-content-length"))
    self_tests = _self_tests()
    # The model, version and self test first: the body is bounded by what they need.
    verification = await anyio.to_thread.run_sync(
        self_tests.prepare_verification, ctx, name, number, index
    )
    body = await read_body(request, verification.max_body_bytes)
    return await anyio.to_thread.run_sync(
        self_tests.verify_self_test, verification, body, header_length
    )


def _self_tests() -> ModuleType:
    """The self-test service, imported when a self test is first asked for: it needs
    numpy (12 MiB), which a worker that never serves one does not load."""
    from registry.services.triton import self_tests

    return self_tests


INFER_HINT = (
    "this registry is a model repository, not an inference server: inference runs in "
    "Triton; send infer requests to your Triton server's /v2/models/{name}/infer "
    "(GET /v2/models/{name}/self_tests/0 here gives a ready-made request body)"
)


@post(_paths("/infer"), summary="404 with a hint: inference runs in Triton", tags=["v2"])
async def infer(name: str, version: str | None = None) -> None:
    raise InferenceElsewhere(INFER_HINT.format(name=name))


ROUTES: list[Any] = [
    server_metadata,
    health_live,
    health_ready,
    repository_index,
    load_model,
    unload_model,
    model_metadata,
    model_config,
    model_ready,
    self_test_request,
    verify_self_test,
    infer,
]
