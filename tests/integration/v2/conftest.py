"""Helpers for the Triton v2 tests: real tritonclient clients against ``live_server``."""

from __future__ import annotations

import asyncio
import hashlib
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from backports.zstd import zipfile

from registry.carton.manifest import build_manifest
from registry.carton.zipwrite import STORED, write_zip
from registry.db.tables import Blob, Carton, CartonFile, Model, Version
from tests.helpers import row_counts


def host_of(live_server: Any) -> str:
    return live_server.url[len("http://") :]


@pytest.fixture
def triton(live_server: Any) -> Any:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(url=host_of(live_server))
    try:
        yield client
    finally:
        client.close()


def run_aio(live_server: Any, fn: Callable[[Any], Any]) -> Any:
    """Run ``await fn(aio_client)`` with a fresh tritonclient.http.aio client."""
    import tritonclient.http.aio as aioclient

    async def main() -> Any:
        client = aioclient.InferenceServerClient(url=host_of(live_server))
        try:
            return await fn(client)
        finally:
            await client.close()

    return asyncio.run(main())


def counts(ctx: Any) -> dict[str, int]:
    return row_counts(ctx, Blob, Carton, CartonFile, Model, Version)


def push(live_server: Any, carton: Path | bytes) -> dict[str, Any]:
    data = carton.read_bytes() if isinstance(carton, Path) else carton
    response = httpx.post(live_server.url + "/api/v1/cartons", content=data, timeout=60)
    assert response.status_code in (200, 201), response.text
    return response.json()  # type: ignore[no-any-return]


def read_carton(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {i.filename: z.read(i.filename) for i in z.infolist()}


def make_carton(members: dict[str, bytes]) -> bytes:
    """A carton zip from members (MANIFEST computed here)."""
    manifest = build_manifest((p, hashlib.sha256(d).hexdigest()) for p, d in members.items())
    out = io.BytesIO()
    ordered = [("MANIFEST", manifest.raw), *sorted(members.items())]
    write_zip(out, [(p, (lambda d=d: io.BytesIO(d)), STORED) for p, d in ordered])
    return out.getvalue()
