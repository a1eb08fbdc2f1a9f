"""The JSON API under /api/v1: thin controllers over registry.services."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import anyio
import anyio.from_thread
from litestar import Controller, Request, Response, delete, get, post, put

from registry.errors import InvalidRequest, UploadTooLarge
from registry.http.deps import read_body, spooled_request
from registry.services import blobs as blob_service
from registry.services import catalog
from registry.services.context import RegistryContext
from registry.services.ingest import ingest_file
from registry.services.lookups import models_page
from registry.services.streams import IteratorReader


async def _json_body(request: Request) -> Any:
    body = await read_body(request, MAX_JSON_BODY_BYTES)
    if not body.strip():
        return {}
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise InvalidRequest(f"request body is not valid JSON: {exc}") from exc


# JSON documents here are small (hash lists, tag moves): 16 MiB holds 200k hashes.
MAX_JSON_BODY_BYTES = 16 * 1024 * 1024


class ApiController(Controller):
    path = "/api/v1"
    tags = ["api"]

    @post("/cartons", status_code=201, summary="Push a carton (body: the .carton bytes)")
    async def push_carton(
        self,
        request: Request,
        ctx: RegistryContext,
        model: str | None = None,
        tag: str | None = None,
    ) -> Response:
        async with spooled_request(request, ctx, ctx.settings.max_upload_bytes) as path:
            result = await anyio.to_thread.run_sync(
                partial(ingest_file, ctx, path, model_name=model, tag=tag)
            )
        return Response(result.as_json(), status_code=201 if result.created else 200)

    @post("/blobs/missing", status_code=200, summary="Which of these blobs are not stored?")
    async def blobs_missing(self, request: Request, ctx: RegistryContext) -> dict[str, Any]:
        body = await _json_body(request)
        hashes = body.get("sha256") if isinstance(body, dict) else None
        if not isinstance(hashes, list):
            raise InvalidRequest('body must be {"sha256": ["<hex>", ...]}')
        missing = await anyio.to_thread.run_sync(blob_service.missing_blobs, ctx, hashes)
        return {"missing": missing}

    @put("/blobs/{sha256:str}", status_code=201, summary="Upload one blob, verified")
    async def put_blob(self, request: Request, ctx: RegistryContext, sha256: str) -> Response:
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > ctx.settings.max_upload_bytes:
            raise UploadTooLarge(f"blob of {declared} bytes exceeds REGISTRY_MAX_UPLOAD_BYTES")
        stream = request.stream()

        def next_chunk() -> bytes:
            try:
                return anyio.from_thread.run(stream.__anext__)  # type: ignore[arg-type]
            except StopAsyncIteration:
                return b""

        reader = IteratorReader(iter(next_chunk, b""))
        result = await anyio.to_thread.run_sync(blob_service.put_blob, ctx, sha256, reader)
        return Response(result, status_code=201 if result["created"] else 200)

    @get("/cartons/{sha256:str}", summary="Carton metadata")
    async def get_carton(self, ctx: RegistryContext, sha256: str) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(catalog.get_carton, ctx, sha256)

    @get("/models", summary="Models, searchable and paginated")
    async def list_models(
        self,
        ctx: RegistryContext,
        q: str | None = None,
        sort: str = "name",
        limit: int = catalog.DEFAULT_PAGE,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        page = await anyio.to_thread.run_sync(
            partial(models_page, ctx, q=q, sort=sort, limit=limit, cursor=cursor)
        )
        return {"models": page.items, "next_cursor": page.next_cursor}

    @get("/models/{name:str}", summary="Versions and tags of one model")
    async def get_model(self, ctx: RegistryContext, name: str) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(catalog.get_model, ctx, name)

    @delete("/models/{name:str}", status_code=200, summary="Delete a model and its versions")
    async def delete_model(self, ctx: RegistryContext, name: str) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(catalog.delete_model, ctx, name)

    @put("/models/{name:str}/tags/{tag:str}", status_code=200, summary="Move or create a tag")
    async def put_tag(
        self, request: Request, ctx: RegistryContext, name: str, tag: str
    ) -> dict[str, Any]:
        body = await _json_body(request)
        if not isinstance(body, dict):
            raise InvalidRequest('body must be {"manifest_sha256": "..."} or {"version": N}')
        version = body.get("version")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
            raise InvalidRequest('"version" must be an integer')
        manifest = body.get("manifest_sha256")
        if manifest is not None and not isinstance(manifest, str):
            raise InvalidRequest('"manifest_sha256" must be a string')
        return await anyio.to_thread.run_sync(
            partial(
                catalog.put_tag,
                ctx,
                name,
                tag,
                manifest_sha256=manifest,
                version=version,
                if_match=request.headers.get("if-match"),
            )
        )

    @delete("/models/{name:str}/tags/{tag:str}", status_code=200, summary="Remove a tag")
    async def delete_tag(
        self, request: Request, ctx: RegistryContext, name: str, tag: str
    ) -> dict[str, Any]:
        await anyio.to_thread.run_sync(
            partial(catalog.delete_tag, ctx, name, tag, if_match=request.headers.get("if-match"))
        )
        return {"model_name": name, "tag": tag, "deleted": True}

    @delete(
        "/models/{name:str}/versions/{version:int}", status_code=200, summary="Remove a version"
    )
    async def delete_version(self, ctx: RegistryContext, name: str, version: int) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(catalog.delete_version, ctx, name, version)

    @get("/stats", summary="Counts and storage accounting")
    async def stats(self, ctx: RegistryContext) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(catalog.get_stats, ctx)
