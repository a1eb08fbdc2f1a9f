"""Reading stored blobs: facts from the index and the store, bytes by range, on both store kinds."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry.blobstore import BlobNotFound
from registry.errors import StorageUnavailable
from registry.services.context import RegistryContext
from registry.services.stored_blobs import (
    READ_PIECE,
    StoredFile,
    cached_blob,
    read_blob,
    stored_blob,
    verified_small_blob,
)
from registry.settings import Settings
from tests.rawstore import layout_key, raw_set

DATA = os.urandom(2 * READ_PIECE + 123)


@pytest.fixture(params=["file", "memory"])
def store_ctx(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RegistryContext]:
    blob_store = "memory://" if request.param == "memory" else f"file://{tmp_path / 'blobs'}"
    settings = Settings(data_dir=tmp_path / "data", blob_store=blob_store)
    ctx = RegistryContext.open(settings, migrate=True)
    try:
        yield ctx
    finally:
        ctx.close()


def put(ctx: RegistryContext, data: bytes) -> StoredFile:
    sha = hashlib.sha256(data).hexdigest()
    ctx.blobs.put_bytes(sha, data)
    return StoredFile(sha, len(data), None, None)


def test_ranges_are_clamped_and_pieces_bounded(store_ctx):
    blob = put(store_ctx, DATA)
    pieces = list(read_blob(store_ctx, blob))
    assert b"".join(pieces) == DATA and max(map(len, pieces)) <= READ_PIECE
    for start, end in ((0, 1), (5, READ_PIECE + 7), (len(DATA) - 3, None), (10, 10**9)):
        assert b"".join(read_blob(store_ctx, blob, start, end)) == DATA[start:end]
    assert list(read_blob(store_ctx, blob, len(DATA))) == []


def test_facts_are_kept_once_read(store_ctx):
    # Trusted for a minute, not 50 ms: a loaded machine must not turn trust into a race.
    store_ctx.caches.facts.trust_seconds = 60.0
    blob = put(store_ctx, DATA)
    assert cached_blob(store_ctx, blob.sha256) is None
    assert stored_blob(store_ctx, blob.sha256) == blob  # in the store, not indexed
    assert cached_blob(store_ctx, blob.sha256) == blob
    with pytest.raises(BlobNotFound):
        stored_blob(store_ctx, hashlib.sha256(b"absent").hexdigest())


def _replace_file(ctx: RegistryContext, sha: str, data: bytes) -> None:
    raw_set(ctx.blobs, layout_key(sha), data)


@pytest.fixture
def file_ctx(tmp_path: Path) -> Iterator[RegistryContext]:
    settings = Settings(data_dir=tmp_path / "data", blob_store=f"file://{tmp_path / 'blobs'}")
    ctx = RegistryContext.open(settings, migrate=True)
    try:
        yield ctx
    finally:
        ctx.close()


def test_a_store_file_shorter_than_the_index_says_is_an_error(file_ctx):
    blob = put(file_ctx, DATA)
    _replace_file(file_ctx, blob.sha256, DATA[:100])
    with pytest.raises(StorageUnavailable, match="ends at byte 100"):
        b"".join(read_blob(file_ctx, blob))


def test_small_blobs_are_verified_before_they_are_kept(file_ctx):
    facts = file_ctx.caches.facts
    facts.adopt(7, read_at=float("inf"))  # a generation trusted for the whole test
    sound, damaged, gone = (put(file_ctx, b"small file %d" % i) for i in range(3))
    assert verified_small_blob(file_ctx, sound, 7) == b"small file 0"
    assert facts.small_blobs.get(sound.sha256) == b"small file 0"
    _replace_file(file_ctx, damaged.sha256, b"small file X")  # same size, other bytes
    with pytest.raises(StorageUnavailable, match="damaged"):
        verified_small_blob(file_ctx, damaged, 7)
    file_ctx.blobs.delete(gone.sha256)
    with pytest.raises(StorageUnavailable, match="missing from the store"):
        verified_small_blob(file_ctx, gone, 7)
    assert facts.small_blobs.get(damaged.sha256) is None
    # Loaded under an older generation: not kept.
    assert verified_small_blob(file_ctx, put(file_ctx, b"late"), 6) == b"late"
    assert facts.small_blobs.get(hashlib.sha256(b"late").hexdigest()) is None
