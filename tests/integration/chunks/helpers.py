"""Helpers for the chunk store's end-to-end tests: push weights files, pull them back,
and know which chunks a file is made of (cut here exactly as the registry cuts)."""

from __future__ import annotations

import io
import random
import zipfile
from collections.abc import Iterable

from registry.chunking import chunk_hash, iter_chunks
from registry.services.context import RegistryContext
from tests.helpers import check_full, make_carton, sha

WEIGHTS = "model/weights.safetensors"


def weights_carton(data: bytes, model: str, **files: bytes) -> bytes:
    """A Stored carton of ``model`` holding ``data`` as its weights file (and ``files``)."""
    return make_carton(
        {WEIGHTS: data, **{f"model/{k}": v for k, v in files.items()}},
        model_name=model,
        stored=True,
    )


def push(client, carton: bytes, status: int = 201) -> dict:
    response = client.post("/api/v1/cartons", content=carton)
    assert response.status_code == status, response.text
    return response.json()


def stats(client) -> dict:
    return client.get("/api/v1/stats").json()


def chunk_lengths(ctx: RegistryContext, datas: Iterable[bytes]) -> dict[str, int]:
    """Every distinct chunk of the files (BLAKE3 name -> length), as the registry cuts them."""
    return {
        chunk_hash(chunk): len(chunk)
        for data in datas
        for chunk in iter_chunks(ctx.chunk_params, iter([data]))
    }


def check_pulls(
    client,
    manifest: str,
    data: bytes,
    *,
    edges: Iterable[int] = (),
    ranges: int = 6,
    seed: int = 0,
) -> None:
    """The full carton, ``/blobs/{sha}`` and Range reads (random ones, and ones across
    ``edges``: where a variant's bytes switch between old and new) give exactly ``data``."""
    full = client.get(f"/cartons/{manifest}.carton", params={"form": "full"})
    assert full.status_code == 200, full.text[:500]
    check_full(full.content, manifest)
    with zipfile.ZipFile(io.BytesIO(full.content)) as z:
        assert z.read(WEIGHTS) == data
    url = f"/blobs/{sha(data)}"
    whole = client.get(url)
    assert whole.status_code == 200 and whole.content == data
    rng = random.Random(seed)
    spans = [(max(0, e - 70_000), min(len(data), e + 70_000)) for e in edges]
    for _ in range(ranges):
        start = rng.randrange(len(data))
        spans.append((start, min(len(data), start + rng.randint(1, 3 << 20))))
    for start, end in spans:
        r = client.get(url, headers={"Range": f"bytes={start}-{end - 1}"})
        assert r.status_code == 206, r.text[:200]
        assert r.headers["content-range"] == f"bytes {start}-{end - 1}/{len(data)}"
        assert r.content == data[start:end], (start, end)
