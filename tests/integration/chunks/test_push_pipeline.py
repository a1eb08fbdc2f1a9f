"""A push's stages overlap: the next member is read while the last one's chunks are cut,
named and placed (``FileWriter.close_later``), and a file's next batch is cut on the
chunking thread while the last one is placed on the placing thread. On both backend
pairs: every file comes back whole, and a member whose chunks fail to be placed fails
the push with nothing kept."""

from __future__ import annotations

import hashlib
import io
import random
import threading
import zipfile

from sqlalchemy import select

from registry.db.tables import Blob, BlobSegment, Carton, ChunkClaim, Pack, UploadLease
from registry.services.chunkstore.writer import PackSession
from tests.helpers import check_full, make_carton, row_counts
from tests.integration.chunks.helpers import push

MiB = 1 << 20


def members(count: int, size: int) -> dict[str, bytes]:
    rng = random.Random(count * 7919 + size)
    return {f"model/part-{i}.bin": rng.randbytes(size + i * 4099) for i in range(count)}


def fail_placing(monkeypatch, at_call: int) -> list[int]:
    """``PackSession.place`` fails ("the index went away") on its ``at_call``-th call; the
    list returned gets the chunk count of every call."""
    placed: list[int] = []
    place = PackSession.place

    def failing_place(self, chunks):
        placed.append(len(chunks))
        if len(placed) == at_call:
            raise RuntimeError("the index went away")
        return place(self, chunks)

    monkeypatch.setattr(PackSession, "place", failing_place)
    return placed


def test_members_overlapping_on_the_chunking_thread_each_come_back_whole(client, registry_ctx):
    files = members(4, 3 * MiB)
    carton = make_carton(files, model_name="overlap", stored=True)
    manifest = push(client, carton)["manifest_sha256"]
    full = client.get(f"/cartons/{manifest}.carton", params={"form": "full"})
    assert full.status_code == 200, full.text[:300]
    check_full(full.content, manifest)
    with zipfile.ZipFile(io.BytesIO(full.content)) as z:
        assert {path: z.read(path) for path in files} == files
    for path, data in files.items():
        sha = hashlib.sha256(data).hexdigest()
        blob = client.get(f"/blobs/{sha}")
        assert blob.status_code == 200 and blob.content == data, path
        with registry_ctx.sessions() as session:
            segments = session.scalars(
                select(BlobSegment.length).where(BlobSegment.blob_sha256 == sha)
            ).all()
        assert sum(segments) == len(data), path


def test_a_member_whose_chunks_cannot_be_placed_fails_the_push_and_keeps_nothing(
    client, registry_ctx, monkeypatch
):
    placed = fail_placing(monkeypatch, at_call=2)  # the first member's batch goes, not the second's
    carton = make_carton(members(4, 3 * MiB), model_name="fails", stored=True)
    response = client.post("/api/v1/cartons", content=carton)
    assert response.status_code == 500, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert len(placed) >= 2
    kept = row_counts(registry_ctx, Carton, Blob, BlobSegment, ChunkClaim, UploadLease)
    assert kept == dict.fromkeys(kept, 0), kept
    with registry_ctx.sessions() as session:  # its packs went with it (no file uses them)
        assert session.scalars(select(Pack.name)).all() == []


def test_batches_are_placed_on_the_placing_thread_in_the_order_they_were_cut(
    client, registry_ctx, monkeypatch
):
    calls: list[tuple[str, int]] = []
    place = PackSession.place

    def recording_place(self, chunks):
        calls.append((threading.current_thread().name, sum(len(data) for _, data in chunks)))
        return place(self, chunks)

    monkeypatch.setattr(PackSession, "place", recording_place)
    data = random.Random(5).randbytes(40 * MiB)  # three batches of about 16 MiB
    manifest = push(client, make_carton({"model/big.bin": data}, model_name="big", stored=True))[
        "manifest_sha256"
    ]
    assert {name.rsplit("_", 1)[0] for name, _ in calls} == {"chunk-placer"}
    assert len(calls) == 3 and sum(size for _, size in calls) == len(data)
    full = client.get(f"/cartons/{manifest}.carton", params={"form": "full"})
    with zipfile.ZipFile(io.BytesIO(full.content)) as z:
        assert z.read("model/big.bin") == data


def test_no_batch_of_a_file_is_placed_after_one_of_its_batches_failed(
    client, registry_ctx, monkeypatch
):
    placed = fail_placing(monkeypatch, at_call=1)  # the first batch of three, the second being cut
    data = random.Random(6).randbytes(40 * MiB)
    response = client.post(
        "/api/v1/cartons",
        content=make_carton({"model/big.bin": data}, model_name="big", stored=True),
    )
    assert response.status_code == 500, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert len(placed) == 1
    kept = row_counts(registry_ctx, Carton, Blob, BlobSegment, ChunkClaim, UploadLease, Pack)
    assert kept == dict.fromkeys(kept, 0), kept
