"""A push's members overlap: the next member is read while the last one's chunks are
cut, named and placed on the session's chunking thread (``FileWriter.close_later``).
On both backend pairs: every file comes back whole, and a member whose chunks fail to
be placed fails the push with nothing kept."""

from __future__ import annotations

import hashlib
import io
import random
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
    placed: list[int] = []
    place = PackSession.place

    def failing_place(self, chunks):
        placed.append(len(chunks))
        if len(placed) == 2:  # the first member's last batch is placed, the second's fails
            raise RuntimeError("the index went away")
        return place(self, chunks)

    monkeypatch.setattr(PackSession, "place", failing_place)
    carton = make_carton(members(4, 3 * MiB), model_name="fails", stored=True)
    response = client.post("/api/v1/cartons", content=carton)
    assert response.status_code == 500, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert len(placed) >= 2
    kept = row_counts(registry_ctx, Carton, Blob, BlobSegment, ChunkClaim, UploadLease)
    assert kept == dict.fromkeys(kept, 0), kept
    with registry_ctx.sessions() as session:  # its packs went with it (no file uses them)
        assert session.scalars(select(Pack.name)).all() == []
