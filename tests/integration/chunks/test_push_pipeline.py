"""A push's stages overlap: the next member is read while the last one's chunks are cut,
named and placed (``FileWriter.close_later``); a file's next batch is cut on the chunking
thread while the last one is placed on the placing thread, and hashed on the hashing thread
beside the cutting. On both backend pairs: every file comes back whole, and a member whose
chunks fail to be placed, or whose bytes fail to be hashed, fails the push with nothing
kept."""

from __future__ import annotations

import hashlib
import io
import random
import threading
import zipfile

import pytest
from sqlalchemy import select

from registry.db.tables import Blob, BlobSegment, Carton, ChunkClaim, Pack, UploadLease
from registry.services.chunkstore.files import FileWriter
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


def test_a_file_is_hashed_on_the_hashing_thread_in_the_order_written(
    client, registry_ctx, monkeypatch
):
    calls: list[tuple[str, int]] = []
    hash_pieces = FileWriter._hash

    def recording_hash(self, pieces):
        calls.append((threading.current_thread().name, sum(map(len, pieces))))
        return hash_pieces(self, pieces)

    monkeypatch.setattr(FileWriter, "_hash", recording_hash)
    data = random.Random(7).randbytes(20 * MiB + 12345)  # several hand-offs and a short one
    manifest = push(client, make_carton({"model/big.bin": data}, model_name="big", stored=True))[
        "manifest_sha256"
    ]
    assert {name.rsplit("_", 1)[0] for name, _ in calls} == {"file-hasher"}
    assert len(calls) >= 5 and sum(size for _, size in calls) == len(data)
    blob = client.get(f"/blobs/{hashlib.sha256(data).hexdigest()}")
    assert blob.status_code == 200 and blob.content == data
    assert client.get(f"/api/v1/cartons/{manifest}").status_code == 200


@pytest.mark.parametrize(
    "files",
    [
        pytest.param(members(2, 9 * MiB), id="three-hand-offs-each"),
        # Two hand-offs: no later hand-off waits for the failed one, the digest does.
        pytest.param({"model/one.bin": random.Random(8).randbytes(6 * MiB)}, id="two-hand-offs"),
    ],
)
def test_a_file_whose_hashing_fails_fails_the_push_and_keeps_nothing(
    client, registry_ctx, monkeypatch, files
):
    def failing_hash(self, pieces):
        raise RuntimeError("the hashing thread failed")

    monkeypatch.setattr(FileWriter, "_hash", failing_hash)
    response = client.post(
        "/api/v1/cartons", content=make_carton(files, model_name="unhashed", stored=True)
    )
    assert response.status_code == 500, response.text
    assert response.headers["content-type"].startswith("application/json")
    kept = row_counts(registry_ctx, Carton, Blob, BlobSegment, ChunkClaim, UploadLease, Pack)
    assert kept == dict.fromkeys(kept, 0), kept
