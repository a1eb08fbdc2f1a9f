"""The blob download plan: presigned redirect, compress or not, and when it needs no I/O.

Run on SQLite + the memory store, with no HTTP.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator

import pytest

from registry.services.blob_serving import (
    COMPRESS_MIN_BYTES,
    SNIFF_BYTES,
    cached_plan,
    plan_blob_download,
    worth_compressing,
)
from registry.services.chunkstore.reader import StoredFile
from registry.services.context import RegistryContext
from registry.services.stored_blobs import read_blob, stored_blob
from registry.settings import Settings

TEXT = b"the same words again and again, " * 4096  # compressible, over SNIFF_BYTES
NOISE = os.urandom(200_000)  # incompressible
SMALL = b"a" * COMPRESS_MIN_BYTES  # compressible, but not over the minimum


def put(ctx: RegistryContext, data: bytes) -> StoredFile:
    sha = hashlib.sha256(data).hexdigest()
    ctx.blobs.put_bytes(sha, data)
    return stored_blob(ctx, sha)


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryContext]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("serving"), blob_store="memory://")
    context = RegistryContext.open(settings, migrate=True)
    try:
        yield context
    finally:
        context.close()


def test_worth_compressing_judges_by_size_and_ratio():
    assert worth_compressing(TEXT[:SNIFF_BYTES])
    assert not worth_compressing(NOISE[:SNIFF_BYTES])
    assert not worth_compressing(SMALL)


@pytest.mark.parametrize(
    ("data", "coding", "expected"),
    [(TEXT, "br", "br"), (TEXT, None, None), (NOISE, "gzip", None), (SMALL, "zstd", None)],
)
def test_coding_only_when_accepted_and_worth_it(ctx, data, coding, expected):
    blob = put(ctx, data)
    plan = plan_blob_download(ctx, blob, coding=coding)
    assert (plan.blob.size, plan.redirect_url, plan.coding) == (len(data), None, expected)
    assert b"".join(read_blob(ctx, plan.blob)) == data


def test_the_verdict_is_read_once_then_planning_needs_no_io(ctx, monkeypatch):
    blob = put(ctx, TEXT)
    ctx.caches.facts.compressible.drop(blob.sha256)  # judged by an earlier test
    assert cached_plan(ctx, blob, None) is not None  # identity: nothing to judge
    assert cached_plan(ctx, blob, "gzip") is None  # not judged yet: needs a read
    asked = []
    real = ctx.blobs.iter_chunks

    def spy(sha256, start=0, end=None, *args, **kwargs):
        asked.append((start, end))
        return real(sha256, start, end, *args, **kwargs)

    monkeypatch.setattr(ctx.blobs, "iter_chunks", spy)
    assert plan_blob_download(ctx, blob, coding="gzip").coding == "gzip"
    assert asked == [(0, SNIFF_BYTES)]
    again = cached_plan(ctx, blob, "br")
    assert again is not None and again.coding == "br"
    assert plan_blob_download(ctx, blob, coding="zstd").coding == "zstd"
    assert asked == [(0, SNIFF_BYTES)]  # judged once per blob
    assert b"".join(read_blob(ctx, blob, 10, 20)) == TEXT[10:20]


def test_presigned_redirect_for_bodies_only(ctx, monkeypatch):
    blob = put(ctx, TEXT)
    sha = blob.sha256
    monkeypatch.setattr(
        ctx, "settings", Settings(data_dir=ctx.settings.data_dir, s3_presign_downloads=True)
    )
    # The memory store cannot presign: the bytes are served here.
    assert plan_blob_download(ctx, blob, coding=None).redirect_url is None
    assert cached_plan(ctx, blob, None) is None  # presigning is never planned from memory
    monkeypatch.setattr(ctx.blobs, "presigned_get_url", lambda sha256: f"https://s3/{sha256}")
    for coding in (None, "gzip"):
        plan = plan_blob_download(ctx, blob, coding=coding)
        assert (plan.redirect_url, plan.coding) == (f"https://s3/{sha}", None)
    # A HEAD is answered from the blob's facts alone: no plan, so never redirected.
    assert stored_blob(ctx, sha) == StoredFile(sha, len(TEXT), None, None)
