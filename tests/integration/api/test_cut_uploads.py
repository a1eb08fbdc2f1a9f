"""Cut uploads (docs/chunk-transfer.md): a whole file sent as the chunks its sender cut,
on both backend pairs. The registry names and hashes what arrives as for any upload, does
not cut it again, and refuses a malformed body with nothing stored."""

from __future__ import annotations

import hashlib
import os
import struct
from functools import partial

import pytest
from sqlalchemy import func, select

from registry.chunking import ChunkParams, chunk_hash, iter_chunks
from registry.db.tables import Blob, Chunk, Pack
from registry.services.cut_upload import CUT_UPLOAD_TYPE

MiB = 1 << 20
KiB = 1 << 10


def records(chunks: list[bytes]) -> bytes:
    return b"".join(struct.pack(">I", len(c)) + c for c in chunks)


def put_cut(client, sha: str, body: bytes):
    return client.put(
        f"/api/v1/blobs/{sha}", content=body, headers={"Content-Type": CUT_UPLOAD_TYPE}
    )


def fastcdc(client, data: bytes) -> list[bytes]:
    params = ChunkParams.from_json(client.get("/api/v1/chunking").json())
    return [bytes(c) for c in iter_chunks(params, iter([data]))]


def rows(ctx) -> tuple[int, int, int]:
    with ctx.sessions() as session:
        return tuple(  # type: ignore[return-value]
            session.scalar(select(func.count()).select_from(t)) for t in (Blob, Chunk, Pack)
        )


def refused_storing_nothing(client, ctx, send, says: str, *shas: str) -> None:
    """``send()`` is answered 400 saying ``says`` and stores nothing: the index's rows as
    they were, and none of ``shas`` served."""
    before = rows(ctx)
    r = send()
    assert r.status_code == 400, r.text
    assert says in r.json()["error"]
    assert rows(ctx) == before
    for sha in shas:
        assert client.head(f"/blobs/{sha}").status_code == 404


def test_the_registry_announces_the_content_type(client):
    assert client.get("/api/v1/chunking").json()["cut_upload_type"] == CUT_UPLOAD_TYPE


def test_a_cut_upload_is_stored_as_the_chunks_it_was_cut_into(client):
    data = os.urandom(5 * MiB + 17)
    sha = hashlib.sha256(data).hexdigest()
    chunks = fastcdc(client, data)
    r = put_cut(client, sha, records(chunks))
    assert r.status_code == 201, r.text
    assert r.json() == {
        "sha256": sha,
        "size": len(data),
        "created": True,
        "bytes_stored": len(data),
        "bytes_healed": 0,
    }
    assert client.get(f"/blobs/{sha}").content == data
    plan = client.get(f"/api/v1/blobs/{sha}/chunks").json()
    assert [c["hash"] for c in plan["chunks"]] == [chunk_hash(c) for c in chunks]
    # The same file sent plain afterwards is the same blob, cut the same way by the registry.
    again = client.put(f"/api/v1/blobs/{sha}", content=data).json()
    assert again["created"] is False and again["bytes_stored"] == 0


def test_the_cuts_are_the_senders_within_the_bounds(client):
    """Not FastCDC's cuts: accepted as they are (the sender's word, as in an assembly)."""
    data = os.urandom(2 * MiB + 5)
    sha = hashlib.sha256(data).hexdigest()
    step = 100 * KiB
    chunks = [data[i : i + step] for i in range(0, len(data), step)]  # the last: 5 bytes
    r = put_cut(client, sha, records(chunks))
    assert r.status_code == 201, r.text
    plan = client.get(f"/api/v1/blobs/{sha}/chunks").json()
    assert [c["size"] for c in plan["chunks"]] == [len(c) for c in chunks]
    assert client.get(f"/blobs/{sha}").content == data


def test_a_small_file_sent_cut_is_stored_whole(client, registry_ctx):
    data = os.urandom(registry_ctx.settings.chunk_min_file_bytes)
    half = len(data) // 2
    sha = hashlib.sha256(data).hexdigest()
    r = put_cut(client, sha, records([data[:half], data[half:]]))
    assert r.status_code == 201, r.text
    assert client.get(f"/api/v1/blobs/{sha}/chunks").json()["chunked"] is False
    assert client.get(f"/blobs/{sha}").content == data


def _bodies(data: bytes) -> dict[str, tuple[bytes, str]]:
    """Malformed cut bodies of ``data`` and what their refusal says."""
    good = records([data[i : i + 64 * KiB] for i in range(0, len(data), 64 * KiB)])
    tiny = records([data[:KiB], data[KiB:]])
    return {
        "chunk over max_size": (records([data[: 300 * KiB], data[300 * KiB :]]), "chunks are 1 to"),
        "empty record": (records([data[: 64 * KiB], b"", data[64 * KiB :]]), "chunks are 1 to"),
        "short chunk before the last": (tiny, "before the file's last"),
        "ends inside a length": (good + b"\x00\x01", "inside a record's length"),
        "ends inside a chunk": (good + struct.pack(">I", 1000) + b"x", "inside a chunk"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "chunk over max_size",
        "empty record",
        "short chunk before the last",
        "ends inside a length",
        "ends inside a chunk",
    ],
)
def test_a_malformed_cut_upload_is_refused_and_stores_nothing(client, registry_ctx, case):
    data = os.urandom(3 * MiB)
    sha = hashlib.sha256(data).hexdigest()
    body, says = _bodies(data)[case]
    refused_storing_nothing(client, registry_ctx, partial(put_cut, client, sha, body), says, sha)
    names = [chunk_hash(c) for c in fastcdc(client, data)]
    assert client.post("/api/v1/chunks/missing", json={"chunks": names}).json()["missing"] == names


def test_a_cut_upload_of_other_bytes_than_its_name_stores_nothing(client, registry_ctx):
    data = os.urandom(3 * MiB)
    wrong = hashlib.sha256(b"another file").hexdigest()
    send = partial(put_cut, client, wrong, records(fastcdc(client, data)))
    refused_storing_nothing(client, registry_ctx, send, "digest mismatch", wrong)
