"""The chunk transfer routes (docs/chunk-transfer.md): thin over services.chunk_transfer."""

from __future__ import annotations

from functools import partial

import anyio
import anyio.to_thread
from litestar import Controller, Request, post

from registry.http import schemas
from registry.http.auth import require_push
from registry.http.deps import StreamedBody
from registry.http.overload import IngestGate, ingest_client
from registry.http.routing import get
from registry.http.schemas import MAX_JSON_BODY_BYTES, StrictJSON, as_body
from registry.services import chunk_transfer
from registry.services.context import RegistryContext

# The most any chunk upload's body may be; each is held to its own limit as it arrives
# (chunk_transfer.max_upload_body: the chunk bytes and records one upload may hold).
MAX_UPLOAD_BODY_BYTES = 2 * chunk_transfer.MAX_BATCH_BYTES
# An assembly's body: up to MAX_ASSEMBLE quoted names with their commas, and the envelope.
MAX_ASSEMBLE_BODY_BYTES = chunk_transfer.MAX_ASSEMBLE * 68 + 4096


class ChunksController(Controller):
    path = "/api/v1"
    tags = ["chunks"]

    @get("/chunking", summary="How files are cut into chunks (clients cut the same way)")
    async def chunking(self, ctx: RegistryContext) -> schemas.Chunking:
        return as_body(chunk_transfer.chunking(ctx), schemas.Chunking)

    @post(
        "/chunks/missing",
        status_code=200,
        guards=[require_push],
        dto=StrictJSON[schemas.MissingChunksQuery],
        return_dto=None,
        request_max_body_size=MAX_JSON_BODY_BYTES,
        summary="Which of these chunks are not stored?",
    )
    async def chunks_missing(
        self, ctx: RegistryContext, data: schemas.MissingChunksQuery | None = None
    ) -> schemas.MissingChunks:
        if data is None:
            raise schemas.MissingChunksQuery.invalid()
        missing = await anyio.to_thread.run_sync(chunk_transfer.missing_chunks, ctx, data.chunks)
        return schemas.MissingChunks(missing=missing)

    @post(
        "/chunks",
        status_code=200,
        guards=[require_push],
        request_max_body_size=MAX_UPLOAD_BODY_BYTES,
        summary="Upload chunks: records of a 32-byte BLAKE3, a 4-byte length and the bytes",
    )
    async def upload_chunks(
        self, request: Request, ctx: RegistryContext, ingest_gate: IngestGate
    ) -> schemas.StoredChunks:
        body = StreamedBody(
            request,
            chunk_transfer.max_upload_body(ctx),
            "a chunk upload's limit (max_batch_bytes of chunks in max_batch_records records)",
        )
        async with ingest_gate.slot(ingest_client(request)) as limiter, body.feeding():
            result = await anyio.to_thread.run_sync(
                chunk_transfer.store_chunks, ctx, body, limiter=limiter
            )
        return as_body(result, schemas.StoredChunks)

    @post(
        "/blobs/{sha256:str}/assemble",
        status_code=200,
        guards=[require_push],
        dto=StrictJSON[schemas.AssembleQuery],
        return_dto=None,
        request_max_body_size=MAX_ASSEMBLE_BODY_BYTES,
        summary="Make a blob from stored chunks (verified against its sha256)",
    )
    async def assemble(
        self,
        request: Request,
        ctx: RegistryContext,
        ingest_gate: IngestGate,
        sha256: str,
        data: schemas.AssembleQuery | None = None,
    ) -> schemas.StoredBlob:
        if data is None:
            raise schemas.AssembleQuery.invalid()
        async with ingest_gate.slot(ingest_client(request)) as limiter:
            result = await anyio.to_thread.run_sync(
                partial(chunk_transfer.assemble_blob, ctx, sha256, data.size, data.chunks),
                limiter=limiter,
            )
        return as_body(result, schemas.StoredBlob)

    @get("/blobs/{sha256:str}/chunks", summary="A file's chunks in order, for pulls with a cache")
    async def reconstruction(self, ctx: RegistryContext, sha256: str) -> schemas.Reconstruction:
        result = await anyio.to_thread.run_sync(chunk_transfer.reconstruction, ctx, sha256)
        return as_body(result, schemas.Reconstruction)
