"""The JSON API under /api/v1: thin controllers over registry.services.

Bodies in and out are the structs of ``registry.http.schemas``; writes carry
their auth guard (``registry.http.auth``); all service work runs in a worker
thread, and no handler opens a database session itself.
"""

from __future__ import annotations

from functools import partial

import anyio
import anyio.from_thread
import anyio.to_thread
from litestar import Controller, Request, Response, delete, post, put

from registry.errors import InvalidBody
from registry.http import schemas
from registry.http.auth import bearer_token, invalid_token, require_delete, require_push
from registry.http.deps import StreamedBody
from registry.http.overload import IngestGate, ingest_client
from registry.http.routing import get
from registry.http.schemas import MAX_JSON_BODY_BYTES, StrictJSON, as_body
from registry.services import blobs as blob_service
from registry.services import cartons, deletes, listing, models, stats, tags
from registry.services.auth import SCOPES, authenticate_grant
from registry.services.context import RegistryContext
from registry.services.cut_upload import CUT_FILES_TYPE, CUT_UPLOAD_TYPE
from registry.services.ingest import check_may_push_into, ingest_stream
from registry.services.lookups import models_page
from registry.services.names import require_version


class ApiController(Controller):
    path = "/api/v1"
    tags = ["api"]

    @post(
        "/cartons",
        status_code=201,
        guards=[require_push],
        summary="Push a carton (body: the .carton bytes)",
    )
    async def push_carton(
        self,
        request: Request,
        ctx: RegistryContext,
        ingest_gate: IngestGate,
        model: str | None = None,
        tag: str | None = None,
        namespace: str | None = None,
    ) -> Response[schemas.PushedCarton]:
        if namespace is not None:  # refused before the body is read when it is not allowed
            await anyio.to_thread.run_sync(check_may_push_into, ctx, namespace)
        body = StreamedBody(request, ctx.settings.max_upload_bytes)
        async with ingest_gate.slot(ingest_client(request)) as limiter, body.feeding():
            result = await anyio.to_thread.run_sync(
                partial(ingest_stream, ctx, body, model_name=model, tag=tag, namespace=namespace),
                limiter=limiter,
            )
        return Response(
            as_body(result, schemas.PushedCarton), status_code=201 if result.created else 200
        )

    @post(
        "/blobs/missing",
        status_code=200,
        guards=[require_push],
        dto=StrictJSON[schemas.MissingBlobsQuery],
        return_dto=None,
        request_max_body_size=MAX_JSON_BODY_BYTES,
        summary="Which of these blobs are not stored?",
    )
    async def blobs_missing(
        self, ctx: RegistryContext, data: schemas.MissingBlobsQuery | None = None
    ) -> schemas.MissingBlobs:
        if data is None:
            raise schemas.MissingBlobsQuery.invalid()
        missing = await anyio.to_thread.run_sync(blob_service.missing_blobs, ctx, data.sha256)
        return schemas.MissingBlobs(missing=missing)

    @put(
        "/blobs/{sha256:str}",
        status_code=201,
        guards=[require_push],
        summary="Upload one blob, verified",
        description=(
            "The body is the file's bytes; with `Content-Type: application/vnd.carton.cut-file`, "
            "the file as the chunks its sender cut: per chunk, in file order, a 4-byte "
            "big-endian length and its bytes (docs/chunk-transfer.md, cut uploads)."
        ),
    )
    async def put_blob(
        self, request: Request, ctx: RegistryContext, ingest_gate: IngestGate, sha256: str
    ) -> Response[schemas.UploadedBlob]:
        body = StreamedBody(request, ctx.settings.max_upload_bytes)
        cut = request.content_type[0] == CUT_UPLOAD_TYPE
        async with ingest_gate.slot(ingest_client(request)) as limiter, body.feeding():
            result = await anyio.to_thread.run_sync(
                partial(blob_service.put_blob, ctx, sha256, body, cut=cut), limiter=limiter
            )
        stored = as_body(result, schemas.UploadedBlob)
        return Response(stored, status_code=201 if stored.created else 200)

    @post(
        "/blobs",
        status_code=201,
        guards=[require_push],
        summary="Upload several blobs in one request, each verified",
        description=(
            f"`Content-Type: {CUT_FILES_TYPE}`: per file, its sha256 (32 bytes) and size "
            "(8 bytes, big-endian), then its chunks as a cut upload's records; every file "
            "larger than `min_file_bytes` (docs/chunk-transfer.md, cut uploads of several "
            "files). One answer per file, in order; no file is indexed unless all are good."
        ),
    )
    async def post_blobs(
        self, request: Request, ctx: RegistryContext, ingest_gate: IngestGate
    ) -> Response[schemas.UploadedBlobs]:
        if request.content_type[0] != CUT_FILES_TYPE:
            raise InvalidBody(f"POST /api/v1/blobs takes Content-Type {CUT_FILES_TYPE}")
        body = StreamedBody(request, ctx.settings.max_upload_bytes)
        async with ingest_gate.slot(ingest_client(request)) as limiter, body.feeding():
            results = await anyio.to_thread.run_sync(
                partial(blob_service.put_blobs, ctx, body), limiter=limiter
            )
        stored = schemas.UploadedBlobs(blobs=as_body(results, list[schemas.UploadedBlob]))
        created = any(blob.created for blob in stored.blobs)
        return Response(stored, status_code=201 if created else 200)

    @get(
        "/cartons/{sha256:str}",
        summary="Carton metadata",
        description=(
            "`sha256`: a manifest hash, `sha256:<hash>`, or a unique prefix of at least 8 hex "
            "digits (409 when several cartons share it, 404 when none has it)."
        ),
    )
    async def get_carton(self, ctx: RegistryContext, sha256: str) -> schemas.CartonDetail:
        detail = await anyio.to_thread.run_sync(cartons.get_carton, ctx, sha256)
        return as_body(detail, schemas.CartonDetail)

    @get("/models", summary="Models, searchable and paginated")
    async def list_models(
        self,
        ctx: RegistryContext,
        q: str | None = None,
        sort: str = "name",
        limit: int = listing.DEFAULT_PAGE,
        cursor: str | None = None,
        namespace: str | None = None,
    ) -> schemas.ModelList:
        page = await anyio.to_thread.run_sync(
            partial(
                models_page, ctx, q=q, sort=sort, limit=limit, cursor=cursor, namespace=namespace
            )
        )
        return schemas.ModelList(
            models=as_body(page.items, list[schemas.ModelSummary]), next_cursor=page.next_cursor
        )

    @get("/models/{name:str}", summary="Versions and tags of one model")
    async def get_model(self, ctx: RegistryContext, name: str) -> schemas.ModelDetail:
        detail = await anyio.to_thread.run_sync(models.get_model, ctx, name)
        return as_body(detail, schemas.ModelDetail)

    @delete(
        "/models/{name:str}",
        status_code=200,
        guards=[require_delete],
        summary="Delete a model and its versions",
    )
    async def delete_model(self, ctx: RegistryContext, name: str) -> schemas.ModelDeleted:
        result = await anyio.to_thread.run_sync(deletes.delete_model, ctx, name)
        return as_body(result, schemas.ModelDeleted)

    @put(
        "/models/{name:str}/tags/{tag:str}",
        status_code=200,
        guards=[require_push],
        dto=StrictJSON[schemas.TagMove],
        return_dto=None,
        request_max_body_size=MAX_JSON_BODY_BYTES,
        summary="Move or create a tag",
    )
    async def put_tag(
        self,
        request: Request,
        ctx: RegistryContext,
        name: str,
        tag: str,
        data: schemas.TagMove | None = None,
    ) -> schemas.TagTarget:
        move = data or schemas.TagMove()
        result = await anyio.to_thread.run_sync(
            partial(
                tags.put_tag,
                ctx,
                name,
                tag,
                manifest_sha256=move.manifest_sha256,
                version=move.version,
                if_match=request.headers.get("if-match"),
            )
        )
        return as_body(result, schemas.TagTarget)

    @delete(
        "/models/{name:str}/tags/{tag:str}",
        status_code=200,
        guards=[require_delete],
        summary="Remove a tag",
    )
    async def delete_tag(
        self, request: Request, ctx: RegistryContext, name: str, tag: str
    ) -> schemas.TagDeleted:
        await anyio.to_thread.run_sync(
            partial(tags.delete_tag, ctx, name, tag, if_match=request.headers.get("if-match"))
        )
        return schemas.TagDeleted(model_name=name, tag=tag, deleted=True)

    @delete(
        "/models/{name:str}/versions/{version:str}",
        status_code=200,
        guards=[require_delete],
        summary="Remove a version",
    )
    async def delete_version(
        self, ctx: RegistryContext, name: str, version: str
    ) -> schemas.VersionDeleted:
        number = require_version(version)  # strictly: "+1" must not delete version 1
        result = await anyio.to_thread.run_sync(deletes.delete_version, ctx, name, number)
        return as_body(result, schemas.VersionDeleted)

    @get("/whoami", summary="The auth mode, and the scopes of the request's token")
    async def whoami(self, request: Request, ctx: RegistryContext) -> schemas.Identity:
        """An unknown or revoked token is a 401 whatever ``REGISTRY_AUTH`` says (``login``)."""
        token = bearer_token(request)
        if token is None:
            return schemas.Identity(auth=ctx.settings.auth, scopes=[])
        grant = await anyio.to_thread.run_sync(authenticate_grant, ctx, token)
        if grant is None:
            raise invalid_token()
        return schemas.Identity(
            auth=ctx.settings.auth,
            scopes=[s for s in SCOPES if s in grant.scopes],
            namespaces=sorted(grant.namespaces) if grant.namespaces is not None else None,
        )

    @get("/stats", summary="Counts and storage accounting")
    async def stats(self, ctx: RegistryContext, namespace: str | None = None) -> schemas.Stats:
        """Only what the caller may read; ``?namespace=`` for one namespace's totals."""
        totals = await anyio.to_thread.run_sync(stats.get_stats, ctx, namespace)
        return as_body(totals, schemas.Stats)
