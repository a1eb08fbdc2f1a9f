"""The blob download plan: presigned redirect, compress or not, and the bytes it yields.

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
    plan_blob_download,
    worth_compressing,
)
from registry.services.context import RegistryContext
from registry.settings import Settings

TEXT = b"the same words again and again, " * 4096  # compressible, over SNIFF_BYTES
NOISE = os.urandom(200_000)  # incompressible
SMALL = b"a" * COMPRESS_MIN_BYTES  # compressible, but not over the minimum


def put(ctx: RegistryContext, data: bytes) -> str:
    sha = hashlib.sha256(data).hexdigest()
    ctx.blobs.put_bytes(sha, data)
    return sha


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
    plan = plan_blob_download(ctx, put(ctx, data), send_body=True, coding=coding)
    assert (plan.size, plan.redirect_url, plan.coding) == (len(data), None, expected)
    assert b"".join(plan.iter_bytes()) == data


def test_bytes_already_read_are_not_read_again(ctx, monkeypatch):
    sha = put(ctx, TEXT)
    plan = plan_blob_download(ctx, sha, send_body=True, coding="gzip")
    assert plan.head == TEXT[:SNIFF_BYTES]
    asked = []
    real = ctx.blobs.iter_chunks

    def spy(sha256, start=0, end=None, *args, **kwargs):
        asked.append((start, end))
        return real(sha256, start, end, *args, **kwargs)

    monkeypatch.setattr(ctx.blobs, "iter_chunks", spy)
    assert b"".join(plan.iter_bytes()) == TEXT
    assert asked == [(SNIFF_BYTES, len(TEXT))]
    assert b"".join(plan.iter_bytes(10, 20)) == TEXT[10:20]  # inside the head: no read
    assert (
        b"".join(plan.iter_bytes(SNIFF_BYTES - 5, SNIFF_BYTES + 5))
        == TEXT[SNIFF_BYTES - 5 : SNIFF_BYTES + 5]
    )
    assert asked[1:] == [(SNIFF_BYTES, SNIFF_BYTES + 5)]


def test_presigned_redirect_for_bodies_only(ctx, monkeypatch):
    sha = put(ctx, TEXT)
    monkeypatch.setattr(
        ctx, "settings", Settings(data_dir=ctx.settings.data_dir, s3_presign_downloads=True)
    )
    # The memory store cannot presign: the bytes are served here.
    assert plan_blob_download(ctx, sha, send_body=True, coding=None).redirect_url is None
    monkeypatch.setattr(ctx.blobs, "presigned_get_url", lambda sha256: f"https://s3/{sha256}")
    for coding in (None, "gzip"):
        plan = plan_blob_download(ctx, sha, send_body=True, coding=coding)
        assert (plan.redirect_url, plan.coding) == (f"https://s3/{sha}", None)
    head = plan_blob_download(ctx, sha, send_body=False, coding="gzip")
    assert (head.size, head.redirect_url, head.coding, head.head) == (len(TEXT), None, None, b"")
