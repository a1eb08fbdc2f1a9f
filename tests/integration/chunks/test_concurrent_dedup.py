"""Exact dedup under concurrency, on both backend pairs: pushes racing each other with
overlapping content store every chunk once (one app server, and two sharing one
database and store), and GC then leaves at most ``gc_max_unused`` of dead bytes."""

from __future__ import annotations

import concurrent.futures
import random
import struct
from collections.abc import Iterator

import pytest
from litestar.testing import TestClient
from sqlalchemy import select

from registry.app import create_app
from registry.chunking import chunk_hash, iter_chunks
from registry.db.tables import Blob, ChunkClaim, Pack
from registry.services.context import RegistryContext
from registry.services.file_chunks import load_file_chunks
from registry.services.fsck import check_integrity
from registry.services.gc import collect_garbage
from tests.helpers import make_carton, referenced, sha
from tests.integration.chunks.helpers import chunk_lengths

KiB = 1024
MiB = 1024 * KiB
_rng = random.Random(23)
SHARED = [_rng.randbytes(512 * KiB) for _ in range(10)]
OWN = [_rng.randbytes(512 * KiB) for _ in range(8)]
DOOMED = [_rng.randbytes(384 * KiB) for _ in range(4)]
KEPT = [_rng.randbytes(512 * KiB) for _ in range(4)]


def carton(k: int) -> tuple[bytes, dict[str, bytes]]:
    """Carton ``k`` of eight: five of the ten shared blobs (overlapping its neighbours')
    and one blob of its own."""
    files = {f"model/shared-{(k + j) % 10}.bin": SHARED[(k + j) % 10] for j in range(5)}
    files[f"model/own-{k}.bin"] = OWN[k]
    return make_carton(files, model_name=f"m{k}", stored=True), files


def store_bytes(ctx: RegistryContext) -> int:
    """Every byte the store holds: packs and whole blobs."""
    return sum(p.size for p in ctx.blobs.iter_packs()) + sum(b.size for b in ctx.blobs.iter_blobs())


def live_bytes(ctx: RegistryContext) -> int:
    """What the files some carton names need: whole blobs, and each distinct chunk once."""
    with ctx.sessions() as s:
        files = load_file_chunks(s, referenced(ctx))
    chunks = {h: n for f in files.values() for _, n, h in f.chunks or ()}
    return sum(chunks.values()) + sum(f.size for f in files.values() if f.chunks is None)


def push_all(clients: list[TestClient], cartons: list[bytes]) -> list[int]:
    """Every carton pushed at once, spread over ``clients``; the status codes."""
    jobs = [(clients[i % len(clients)], c) for i, c in enumerate(cartons)]
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        responses = list(pool.map(lambda j: j[0].post("/api/v1/cartons", content=j[1]), jobs))
    for r in responses:
        assert r.status_code in (200, 201), r.text
    return [r.status_code for r in responses]


@pytest.fixture
def second_server(settings, registry_ctx) -> Iterator[TestClient]:
    """A second app server on the same database and store (its own context and pools)."""
    ctx = RegistryContext.open(settings)
    try:
        with TestClient(create_app(ctx=ctx), base_url=settings.public_url) as client:
            yield client
    finally:
        ctx.close()


def test_sixteen_concurrent_overlapping_pushes_store_each_chunk_once(client, registry_ctx):
    made = [carton(k) for k in range(8)]
    statuses = push_all([client], [c for c, _ in made] * 2)
    assert statuses.count(201) >= 8

    distinct = {sha(d): d for _, files in made for d in files.values()}
    chunk_bytes = sum(chunk_lengths(registry_ctx, distinct.values()).values())
    packs = sum(p.size for p in registry_ctx.blobs.iter_packs())
    assert chunk_bytes <= packs <= chunk_bytes * 1.01, (packs, chunk_bytes)
    whole = sum(b.size for b in registry_ctx.blobs.iter_blobs())
    with registry_ctx.sessions() as s:
        toml = sum(s.scalars(select(Blob.size).where(Blob.chunked.is_(False))))
        assert not s.scalars(select(ChunkClaim.hash)).all()  # every claim ended
    assert whole == toml
    report = check_integrity(registry_ctx, verify_hashes=True)
    assert report.ok, report
    for digest, data in distinct.items():
        check_pulls_file(client, digest, data)


def test_concurrent_chunk_uploads_on_two_servers_store_each_chunk_once(
    client, second_server, registry_ctx
):
    """The CLI's path: chunk upload requests racing on two servers, overlapping."""
    chunks = [c for data in SHARED for c in iter_chunks(registry_ctx.chunk_params, iter([data]))]
    # Eight uploads of half the chunks each, from eight places: each chunk in four.
    parts = [(chunks * 2)[k * len(chunks) // 8 :][: len(chunks) // 2] for k in range(8)]
    jobs = [(client if i % 2 else second_server, records(p)) for i, p in enumerate(parts * 2)]
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        responses = list(pool.map(lambda j: j[0].post("/api/v1/chunks", content=j[1]), jobs))
    assert [r.status_code for r in responses] == [200] * len(jobs), [r.text for r in responses]
    sent = {chunk_hash(c): len(c) for part in parts for c in part}
    assert len(sent) == len({chunk_hash(c) for c in chunks})
    assert sum(r.json()["bytes_stored"] for r in responses) == sum(sent.values())
    assert sum(p.size for p in registry_ctx.blobs.iter_packs()) == sum(sent.values())
    names = sorted(sent)
    assert client.post("/api/v1/chunks/missing", json={"chunks": names}).json()["missing"] == []


def records(chunks: list[bytes]) -> bytes:
    """A chunk upload body."""
    return b"".join(struct.pack(">32sI", bytes.fromhex(chunk_hash(c)), len(c)) + c for c in chunks)


def check_pulls_file(client, digest: str, data: bytes) -> None:
    r = client.get(f"/blobs/{digest}")
    assert r.status_code == 200 and r.content == data


def test_two_servers_then_gc_leave_at_most_the_allowed_dead_bytes(
    client, second_server, registry_ctx
):
    made = [carton(k) for k in range(8)]
    push_all([client, second_server], [c for c, _ in made] * 2)
    assert store_bytes(registry_ctx) <= live_bytes(registry_ctx) * 1.01

    # Four pushes whose packs each hold a file that dies (384 KiB) beside one a later
    # carton keeps (512 KiB): 43% of each pack dead, under the half that used to trigger
    # a rewrite, and 1.5 MiB in all, over the default 2% + 1 MiB.
    mixed = [
        make_carton({"model/doomed.bin": d, "model/kept.bin": k}, model_name=f"mix{i}", stored=True)
        for i, (d, k) in enumerate(zip(DOOMED, KEPT, strict=True))
    ]
    push_all([client, second_server], mixed)
    push_all(
        [second_server, client],
        [make_carton({"model/kept.bin": k}, model_name=f"keep{i}") for i, k in enumerate(KEPT)],
    )
    for i in range(4):
        assert client.delete(f"/api/v1/models/mix{i}/versions/1").status_code == 200
    # Half the first models go too: their own blobs' packs die whole.
    for k in range(0, 8, 2):
        assert second_server.delete(f"/api/v1/models/m{k}/versions/1").status_code == 200
    first = collect_garbage(registry_ctx, grace_seconds=0)
    assert first.packs.packs_rewritten >= 1
    collect_garbage(registry_ctx, grace_seconds=0)  # the rewritten packs' old objects go
    live = live_bytes(registry_ctx)
    dead = store_bytes(registry_ctx) - live
    assert 0 <= dead <= 0.02 * live + MiB, (dead, live)
    with registry_ctx.sessions() as s:
        assert all(r is None for r in s.scalars(select(Pack.retired_at)))
    assert check_integrity(registry_ctx, verify_hashes=True).ok
    for data in [*KEPT, *(d for k in range(1, 8, 2) for d in made[k][1].values())]:
        check_pulls_file(second_server, sha(data), data)
