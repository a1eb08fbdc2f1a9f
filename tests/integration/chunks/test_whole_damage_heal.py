"""A damaged small file, stored whole, is refused, recorded and healed (issue 23), on both
backend pairs.

Small files (at most ``REGISTRY_CHUNK_MIN_FILE_BYTES``) are one store object each. A
flipped byte in one: a read refuses it (503) and records it, ``blobs/missing`` asks
for it, fsck reports it; a REST re-push, an upload (``PUT /api/v1/blobs``) or a CLI
re-push writes the bytes over the rotten object, and the record goes.
"""

from __future__ import annotations

import io
import random
import zipfile
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from registry.blobstore.base import blob_key
from registry.carton.paths import CARTON_TOML
from registry.db.tables import DamagedBlob
from registry.services.context import RegistryContext
from registry.services.fsck import check_integrity
from tests.helpers import sha
from tests.integration.chunks.helpers import push, weights_carton
from tests.rawstore import raw_get, raw_set

_rng = random.Random(2323)
WEIGHTS = _rng.randbytes(200_000)  # chunked
NOTES = _rng.randbytes(5_000)  # stored whole
OTHER = _rng.randbytes(3_000)  # stored whole, never damaged
MODEL = "whole-damage"
CARTON = weights_carton(WEIGHTS, MODEL, **{"notes.bin": NOTES, "other.bin": OTHER})


def member(carton: bytes, path: str) -> bytes:
    with zipfile.ZipFile(io.BytesIO(carton)) as z:
        return z.read(path)


def rot(ctx: RegistryContext, data: bytes) -> None:
    """Flip one byte of the stored object behind the store's back."""
    key = blob_key(sha(data))
    stored = raw_get(ctx.blobs, key)
    assert stored == data, "the file is stored whole, under its name"
    rotten = bytearray(stored)
    rotten[len(rotten) // 2] ^= 0x01
    raw_set(ctx.blobs, key, bytes(rotten))


def records(ctx: RegistryContext) -> dict[str, tuple[str, str]]:
    with ctx.sessions() as s:
        return {
            r.sha256: (r.reason, r.found_by)
            for r in s.execute(select(DamagedBlob.sha256, DamagedBlob.reason, DamagedBlob.found_by))
        }


def missing(client, *hashes: str) -> list[str]:
    response = client.post("/api/v1/blobs/missing", json={"sha256": list(hashes)})
    assert response.status_code == 200, response.text
    return response.json()["missing"]


@pytest.mark.parametrize("path", ["model/notes.bin", CARTON_TOML])
def test_a_rotten_whole_blob_is_refused_recorded_and_healed_by_a_re_push(
    client, registry_ctx: RegistryContext, path: str
) -> None:
    ctx = registry_ctx
    data = member(CARTON, path)
    first = push(client, CARTON)
    manifest = first["manifest_sha256"]
    rot(ctx, data)

    # A read refuses the rotten bytes and records them.
    assert client.get(f"/blobs/{sha(data)}").status_code == 503
    assert records(ctx) == {sha(data): ("corrupt", "read")}
    # Known damaged: even a range read (not hashed) is refused now.
    ranged = client.get(f"/blobs/{sha(data)}", headers={"Range": "bytes=0-9"})
    assert ranged.status_code == 503
    assert missing(client, sha(data), sha(OTHER), sha(WEIGHTS)) == [sha(data)]
    report = check_integrity(ctx, verify_hashes=True)
    assert not report.ok and report.corrupt == [sha(data)]
    assert report.damage_cleared == []

    # The same carton again: nothing new, the rotten object written over.
    again = push(client, CARTON, status=200)
    assert again["manifest_sha256"] == manifest
    assert again["bytes_new"] == 0 and again["bytes_stored"] == 0
    assert again["bytes_healed"] == len(data)
    assert raw_get(ctx.blobs, blob_key(sha(data))) == data
    assert records(ctx) == {}
    served = client.get(f"/blobs/{sha(data)}")
    assert served.status_code == 200 and served.content == data
    assert missing(client, sha(data)) == []
    full = client.get(f"/cartons/{manifest}.carton", params={"form": "full"})
    assert full.status_code == 200 and member(full.content, path) == data
    clean = check_integrity(ctx, verify_hashes=True)
    assert clean.ok, clean.as_json()

    unchanged = push(client, CARTON, status=200)
    assert unchanged["bytes_healed"] == 0 and unchanged["bytes_new"] == 0


def test_fsck_records_a_rotten_whole_blob_and_an_upload_heals_it(
    client, registry_ctx: RegistryContext
) -> None:
    ctx = registry_ctx
    push(client, CARTON)
    rot(ctx, NOTES)
    assert missing(client, sha(NOTES)) == []  # nobody looked yet

    report = check_integrity(ctx, verify_hashes=True)
    assert report.corrupt == [sha(NOTES)]
    assert records(ctx) == {sha(NOTES): ("corrupt", "fsck")}
    assert missing(client, sha(NOTES), sha(OTHER)) == [sha(NOTES)]
    assert client.get(f"/blobs/{sha(NOTES)}").status_code == 503

    # An impostor changes nothing.
    wrong = client.put(f"/api/v1/blobs/{sha(NOTES)}", content=b"not the notes")
    assert wrong.status_code == 400, wrong.text
    assert records(ctx) == {sha(NOTES): ("corrupt", "fsck")}

    healed = client.put(f"/api/v1/blobs/{sha(NOTES)}", content=NOTES)
    assert healed.status_code == 200, healed.text
    body = healed.json()
    assert body["created"] is False and body["bytes_stored"] == 0
    assert body["bytes_healed"] == len(NOTES)
    assert records(ctx) == {}
    assert raw_get(ctx.blobs, blob_key(sha(NOTES))) == NOTES
    served = client.get(f"/blobs/{sha(NOTES)}")
    assert served.status_code == 200 and served.content == NOTES
    assert check_integrity(ctx, verify_hashes=True).ok

    again = client.put(f"/api/v1/blobs/{sha(NOTES)}", content=NOTES).json()
    assert again["bytes_healed"] == 0


def test_fsck_drops_the_record_of_a_blob_restored_behind_its_back(
    client, registry_ctx: RegistryContext
) -> None:
    ctx = registry_ctx
    push(client, CARTON)
    rot(ctx, NOTES)
    assert client.get(f"/blobs/{sha(NOTES)}").status_code == 503
    assert sha(NOTES) in records(ctx)
    raw_set(ctx.blobs, blob_key(sha(NOTES)), NOTES)  # restored from a backup

    assert check_integrity(ctx).ok  # sizes only: the record stays
    assert sha(NOTES) in records(ctx)
    report = check_integrity(ctx, verify_hashes=True)
    assert report.ok and report.damage_cleared == [sha(NOTES)]
    assert records(ctx) == {}
    assert missing(client, sha(NOTES)) == []
    served = client.get(f"/blobs/{sha(NOTES)}")
    assert served.status_code == 200 and served.content == NOTES


def test_a_truncated_whole_blob_is_recorded_and_healed(
    client, registry_ctx: RegistryContext
) -> None:
    ctx = registry_ctx
    push(client, CARTON)
    raw_set(ctx.blobs, blob_key(sha(NOTES)), NOTES[:100])
    assert client.get(f"/blobs/{sha(NOTES)}").status_code == 503
    assert records(ctx) == {sha(NOTES): ("wrong_size", "read")}
    assert missing(client, sha(NOTES)) == [sha(NOTES)]
    again = push(client, CARTON, status=200)
    assert again["bytes_healed"] == len(NOTES)
    served = client.get(f"/blobs/{sha(NOTES)}")
    assert served.status_code == 200 and served.content == NOTES
    assert records(ctx) == {} and check_integrity(ctx, verify_hashes=True).ok


def test_a_cli_re_push_uploads_the_rotten_file_and_heals_it(
    live_server, cli, tmp_path: Path
) -> None:
    ctx = live_server.ctx
    path = tmp_path / "whole.carton"
    path.write_bytes(CARTON)
    r = httpx.post(f"{live_server.url}/api/v1/cartons", content=CARTON, timeout=60)
    assert r.status_code == 201, r.text
    rot(ctx, NOTES)
    assert httpx.get(f"{live_server.url}/blobs/{sha(NOTES)}").status_code == 503
    assert sha(NOTES) in records(ctx)
    metrics = httpx.get(f"{live_server.url}/metrics").text
    assert 'registry_damaged_blobs_total{found_by="read",reason="corrupt"}' in metrics

    run = cli("push", str(path), "--url", live_server.url, "--no-cache")
    assert run.code == 0, run.err
    assert "sent the whole file" not in run.out
    assert "uploaded 1 blob(s)" in run.out, run.out
    assert "healed: " in run.out, run.out
    served = httpx.get(f"{live_server.url}/blobs/{sha(NOTES)}")
    assert served.status_code == 200 and served.content == NOTES
    assert records(ctx) == {}
    assert check_integrity(ctx, verify_hashes=True).ok
