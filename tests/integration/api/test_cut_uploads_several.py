"""Cut uploads of several files in one request (``POST /api/v1/blobs``, docs/chunk-transfer.md),
on both backend pairs: every file is named and hashed as in a cut upload of its own, all
are indexed in one transaction, and a request with any bad file or record indexes none."""

from __future__ import annotations

import hashlib
import os
import struct
from functools import partial

import pytest
from sqlalchemy import func, select

from registry.chunking import chunk_hash
from registry.db.tables import Pack
from registry.services.cut_upload import CUT_FILES_TYPE
from tests.integration.api.test_cut_uploads import (
    fastcdc,
    put_cut,
    records,
    refused_storing_nothing,
)

MiB = 1 << 20
KiB = 1 << 10


def header(sha: str, size: int) -> bytes:
    return bytes.fromhex(sha) + struct.pack(">Q", size)


def several(client, files: list[bytes]) -> bytes:
    """The body of ``files`` as FastCDC cuts them, each under its own sha256."""
    return b"".join(
        header(hashlib.sha256(data).hexdigest(), len(data)) + records(fastcdc(client, data))
        for data in files
    )


def post(client, body: bytes, content_type: str = CUT_FILES_TYPE):
    return client.post("/api/v1/blobs", content=body, headers={"Content-Type": content_type})


def packs(ctx) -> int:
    with ctx.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(Pack)) or 0)


def test_the_registry_announces_the_content_type(client):
    assert client.get("/api/v1/chunking").json()["cut_files_type"] == CUT_FILES_TYPE


def test_several_files_are_stored_in_one_request_and_one_pack(client, registry_ctx):
    files = [os.urandom(n) for n in (3 * MiB + 1, 2 * MiB, 5 * MiB + 99)]
    before = packs(registry_ctx)
    r = post(client, several(client, files))
    assert r.status_code == 201, r.text
    assert r.json()["blobs"] == [
        {
            "sha256": hashlib.sha256(data).hexdigest(),
            "size": len(data),
            "created": True,
            "bytes_stored": len(data),
            "bytes_healed": 0,
        }
        for data in files
    ]
    assert packs(registry_ctx) == before + 1  # one pack session: not a pack sealed per file
    for data in files:
        sha = hashlib.sha256(data).hexdigest()
        assert client.get(f"/blobs/{sha}").content == data
        plan = client.get(f"/api/v1/blobs/{sha}/chunks").json()
        assert [c["hash"] for c in plan["chunks"]] == [chunk_hash(c) for c in fastcdc(client, data)]


def test_a_file_stored_already_is_answered_as_such(client):
    known, fresh = os.urandom(2 * MiB), os.urandom(2 * MiB)
    sha = hashlib.sha256(known).hexdigest()
    assert put_cut(client, sha, records(fastcdc(client, known))).status_code == 201
    r = post(client, several(client, [known, fresh]))
    assert r.status_code == 201, r.text
    first, second = r.json()["blobs"]
    assert (first["created"], first["bytes_stored"]) == (False, 0)
    assert (second["created"], second["bytes_stored"]) == (True, len(fresh))
    again = post(client, several(client, [known, fresh]))
    assert again.status_code == 200  # nothing created
    assert [b["created"] for b in again.json()["blobs"]] == [False, False]


def test_one_file_that_is_not_its_name_rejects_them_all(client, registry_ctx):
    good, bad = os.urandom(2 * MiB), os.urandom(2 * MiB)
    wrong = hashlib.sha256(b"another file").hexdigest()
    body = several(client, [good]) + header(wrong, len(bad)) + records(fastcdc(client, bad))
    good_sha = hashlib.sha256(good).hexdigest()
    send = partial(post, client, body)
    refused_storing_nothing(client, registry_ctx, send, "digest mismatch", good_sha, wrong)


def _bodies(client, data: bytes, min_bytes: int) -> dict[str, tuple[bytes, str]]:
    """Malformed bodies of several files and what their refusal says."""
    sha = hashlib.sha256(data).hexdigest()
    good = several(client, [data])
    small = os.urandom(min_bytes)
    cuts = records(fastcdc(client, data))
    return {
        "empty body": (b"", "no files"),
        "ends inside a header": (good + header(sha, len(data))[:20], "inside a file's header"),
        "a file too small": (
            good + header(hashlib.sha256(small).hexdigest(), len(small)) + records([small]),
            "go one to a request",
        ),
        "chunks past the size": (header(sha, len(data) - 1) + cuts, "run past the file's"),
        "ends short of the size": (header(sha, len(data) + 5) + cuts, "ends after"),
        "chunk over max_size": (
            header(sha, len(data)) + records([data[: 300 * KiB], data[300 * KiB :]]),
            "chunks are 1 to",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "empty body",
        "ends inside a header",
        "a file too small",
        "chunks past the size",
        "ends short of the size",
        "chunk over max_size",
    ],
)
def test_a_malformed_body_is_refused_and_stores_nothing(client, registry_ctx, case):
    data = os.urandom(2 * MiB)
    body, says = _bodies(client, data, registry_ctx.settings.chunk_min_file_bytes)[case]
    sha = hashlib.sha256(data).hexdigest()
    refused_storing_nothing(client, registry_ctx, partial(post, client, body), says, sha)


def test_another_content_type_is_refused_before_the_body_is_read(client, registry_ctx):
    data = os.urandom(2 * MiB)
    body = several(client, [data])
    send = partial(post, client, body, content_type="application/octet-stream")
    sha = hashlib.sha256(data).hexdigest()
    refused_storing_nothing(client, registry_ctx, send, CUT_FILES_TYPE, sha)
