"""The client side of the chunk protocol, without a registry: cutting, upload bodies, chunk
plans, ranged fetches (answered by httpx.MockTransport)."""

from __future__ import annotations

import hashlib
import os
import random
import re
import struct

import httpx
import pytest

from registry.chunking import ChunkParams, chunk_hash, iter_chunks
from registry.client import ClientError, Tally
from registry.client.blobfetch import (
    RANGE_BYTES,
    FileChunk,
    _plan,
    _runs,
    chunks_url,
    iter_blob,
)
from registry.client.cache import ChunkCache
from registry.client.chunks import (
    PROBE_BYTES,
    READ_BYTES,
    ChunkCutter,
    probe_names,
    records,
    records_size,
)

PARAMS = ChunkParams()
MiB = 1 << 20
SHA = "ab" * 32


@pytest.mark.parametrize("form", ["stream", "view"])
def test_one_pass_cuts_where_a_cut_of_the_whole_would(form):
    data = os.urandom(3 * READ_BYTES + 12345)
    cutter = ChunkCutter(PARAMS)
    pieces = [data[i : i + READ_BYTES] for i in range(0, len(data), READ_BYTES)]
    seen: list[int] = []
    source = pieces if form == "stream" else memoryview(data)
    found = [chunk for done in cutter.chunks(source, seen.append) for chunk in done]
    expected = list(iter_chunks(PARAMS, iter([data])))
    assert [bytes(d) for _, d in found] == expected
    assert [n for n, _ in found] == [chunk_hash(c) for c in expected]
    assert sum(seen) == len(data)


@pytest.mark.parametrize("source", [[], memoryview(b"")])
def test_an_empty_file_has_no_chunks(source):
    assert [c for done in ChunkCutter(PARAMS).chunks(source) for c in done] == []


def test_an_upload_body_is_digest_length_bytes_per_chunk():
    chunks = [(chunk_hash(b"abc"), b"abc"), (chunk_hash(b"defgh"), b"defgh")]
    body = b"".join(records(chunks))
    first = struct.pack(">32sI", bytes.fromhex(chunk_hash(b"abc")), 3) + b"abc"
    assert body == first + struct.pack(">32sI", bytes.fromhex(chunk_hash(b"defgh")), 5) + b"defgh"
    assert records_size(chunks) == len(body)


def test_chunk_lists_are_found_beside_blob_urls():
    assert chunks_url(f"http://r.test:8080/blobs/{SHA}") == (
        f"http://r.test:8080/api/v1/blobs/{SHA}/chunks"
    )
    assert chunks_url(f"https://r.test/base/blobs/{SHA}") == (
        f"https://r.test/base/api/v1/blobs/{SHA}/chunks"
    )
    assert chunks_url(f"https://cdn.test/files/{SHA}") is None
    assert chunks_url(f"https://r.test/blobs/{SHA}?sig=1") is None


def plan_body(sizes: list[int], **changes: object) -> dict:
    chunks, offset = [], 0
    for i, size in enumerate(sizes):
        chunks.append({"hash": f"{i:064x}", "offset": offset, "size": size})
        offset += size
    return {"sha256": SHA, "size": offset, "chunked": True, "chunks": chunks, **changes}


def test_a_chunk_plan_must_tile_the_file():
    assert _plan(plan_body([10, 20]), SHA) == [
        FileChunk(f"{0:064x}", 0, 10),
        FileChunk(f"{1:064x}", 10, 20),
    ]
    assert _plan(plan_body([10, 20]), "cd" * 32) is None  # another file's
    assert _plan(plan_body([10, 20], size=31), SHA) is None
    assert _plan(plan_body([10, 20], chunked=False), SHA) is None
    assert _plan(plan_body([]), SHA) is None
    gap = plan_body([10, 20])
    gap["chunks"][1]["offset"] = 11
    assert _plan(gap, SHA) is None
    bad_name = plan_body([10])
    bad_name["chunks"][0]["hash"] = "XYZ"
    assert _plan(bad_name, SHA) is None
    assert _plan(["not", "a", "dict"], SHA) is None
    assert _plan(plan_body([RANGE_BYTES]), SHA) is not None
    assert _plan(plan_body([10, RANGE_BYTES + 1]), SHA) is None  # more than a range holds
    assert _plan(plan_body([10, 0, 20]), SHA) is None


class FakeCache(ChunkCache):
    def __init__(self, names: set[str]) -> None:
        self.names = names

    def has(self, name: str) -> bool:
        return name in self.names


def test_missing_chunks_are_fetched_as_runs_of_at_most_range_bytes():
    sizes = [MiB] * 20
    chunks = _plan(plan_body(sizes), SHA)
    assert chunks is not None
    cached = {chunks[i].name for i in (0, 1, 5)}
    runs = _runs(chunks, FakeCache(cached))
    shape = [(c, [chunks.index(x) for x in run]) for c, run in runs]
    assert shape == [
        (True, [0, 1]),
        (False, [2, 3, 4]),
        (True, [5]),
        (False, list(range(6, 6 + RANGE_BYTES // MiB))),
        (False, list(range(6 + RANGE_BYTES // MiB, 20))),
    ]


class Registry:
    """A registry holding one chunked file: its chunk list and ranged reads (or not)."""

    def __init__(self, data: bytes, *, honour_ranges: bool = True) -> None:
        self.data = data
        self.sha = hashlib.sha256(data).hexdigest()
        self.chunks = list(iter_chunks(PARAMS, iter([data])))
        self.honour_ranges = honour_ranges
        self.served = 0
        self.tamper: int | None = None  # a byte offset to flip in ranged answers

    def plan(self) -> dict:
        entries, offset = [], 0
        for c in self.chunks:
            entries.append({"hash": chunk_hash(c), "offset": offset, "size": len(c)})
            offset += len(c)
        return {"sha256": self.sha, "size": len(self.data), "chunked": True, "chunks": entries}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/chunks"):
            return httpx.Response(200, json=self.plan())
        match = re.fullmatch(r"bytes=(\d+)-(\d+)", request.headers.get("range", ""))
        if match is None or not self.honour_ranges:
            self.served += len(self.data)
            return httpx.Response(200, content=self.data)
        start, end = int(match[1]), int(match[2])
        body = bytearray(self.data[start : end + 1])
        if self.tamper is not None and start <= self.tamper <= end:
            body[self.tamper - start] ^= 1
        self.served += len(body)
        return httpx.Response(206, content=bytes(body))

    def fetch(self, cache: ChunkCache | None, tally: Tally | None = None) -> bytes:
        http = httpx.Client(transport=httpx.MockTransport(self))
        url = f"http://reg.test/blobs/{self.sha}"
        return b"".join(iter_blob(http, url, self.sha, cache=cache, tally=tally))


def test_a_warm_cache_fetches_only_the_chunks_it_lacks(tmp_path):
    data = os.urandom(3 * MiB)
    registry = Registry(data)
    cache = ChunkCache(tmp_path, 1 << 30)
    assert registry.fetch(cache) == data
    assert registry.served == len(data)
    tally = Tally()
    registry.served = 0
    assert registry.fetch(cache, tally) == data
    assert registry.served == 0
    assert (tally.moved, tally.reused) == (0, len(data))

    lost = registry.chunks[3]
    (tmp_path / chunk_hash(lost)[:2] / chunk_hash(lost)).write_bytes(b"damaged")
    registry.served = 0
    assert registry.fetch(cache) == data
    assert registry.served == len(lost)
    assert cache.get(chunk_hash(lost)) == lost


def test_a_chunk_that_does_not_match_its_name_is_refused(tmp_path):
    data = os.urandom(MiB)
    registry = Registry(data)
    registry.tamper = 1000
    with pytest.raises(ClientError, match="hashes to"):
        registry.fetch(ChunkCache(tmp_path, 1 << 30))
    kept = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert all(chunk_hash(p.read_bytes()) == p.name for p in kept)  # nothing bad was cached


def test_a_registry_that_ignores_ranges_is_an_error(tmp_path):
    registry = Registry(os.urandom(MiB), honour_ranges=False)
    with pytest.raises(ClientError, match="expected 206"):
        registry.fetch(ChunkCache(tmp_path, 1 << 30))


def test_without_a_cache_the_file_is_fetched_whole_and_verified():
    data = os.urandom(MiB)
    registry = Registry(data)
    tally = Tally()
    assert registry.fetch(None, tally) == data
    assert registry.served == len(data) and tally.moved == len(data)
    registry.data = data[:-1] + bytes([data[-1] ^ 1])
    with pytest.raises(ClientError, match="MANIFEST says"):
        registry.fetch(None)


def test_a_host_without_chunk_lists_serves_the_whole_file(tmp_path):
    data = os.urandom(MiB)
    sha = hashlib.sha256(data).hexdigest()

    def plain(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/chunks"):
            return httpx.Response(404, text="no such thing")
        return httpx.Response(200, content=data)

    http = httpx.Client(transport=httpx.MockTransport(plain))
    url = f"http://cdn.test/blobs/{sha}"
    assert b"".join(iter_blob(http, url, sha, cache=ChunkCache(tmp_path, 0))) == data


class RecordingRegistry:
    """Stands in for RegistryClient in a ChunkUploader: every chunk is missing; it records
    the size of each upload request."""

    def __init__(self) -> None:
        self.uploads: list[int] = []

    def missing_chunks(self, names: list[str]) -> list[str]:
        return names

    def post_chunks(self, parts, size: int) -> dict[str, int]:
        assert sum(len(p) for p in parts) == size
        self.uploads.append(size)
        return {}


def test_each_batch_of_chunks_is_one_upload_request_of_at_most_batch_bytes():
    """A batch that closed just past ``batch_bytes`` used to go out as two requests (the
    second a chunk or two): twice the requests, each a lease, a pack and a commit."""
    from registry.client.chunks import ChunkTerms, ChunkUploader

    registry = RecordingRegistry()
    terms = ChunkTerms(PARAMS, 0, 64 * MiB, 100_000, 1_048_576)
    uploader = ChunkUploader(registry, terms, Tally())  # type: ignore[arg-type]
    uploader.batch_bytes = 2 * MiB
    data = os.urandom(9 * MiB + 4321)
    try:
        names = uploader.send_chunks(memoryview(data))
        uploader.finish()
    finally:
        uploader.close()
    assert len(names) == len(list(iter_chunks(PARAMS, iter([data]))))
    # batch_bytes bounds the chunks' bytes, as the registry counts them; each of the at most
    # 2 MiB / min_size records adds its 36-byte header to the request
    assert all(size <= 2 * MiB + 36 * (2 * MiB // PARAMS.min_size) for size in registry.uploads)
    sent = sum(registry.uploads)
    assert sent == len(data) + 36 * len(names)
    assert len(registry.uploads) <= -(-len(data) // (2 * MiB - PARAMS.max_size)) + 1


@pytest.mark.parametrize("seed", range(6))
def test_a_probe_names_chunks_as_a_cut_of_the_whole_file_does(seed):
    """The probe's names (windows spread over the file, a few chunks dropped where a window
    starts or ends mid-file) are almost all names of the whole file's cut: a registry
    that holds the file, or a version of it, holds some of them."""
    rng = random.Random(seed)
    size = rng.randint(PROBE_BYTES // 2, 40 * MiB)
    data = rng.randbytes(size)
    whole = {chunk_hash(c) for c in iter_chunks(PARAMS, iter([data]))}
    for source in (memoryview(data), iter([data[i : i + MiB] for i in range(0, size, MiB)])):
        names = probe_names(PARAMS, source, size)
        assert names and len(names) == len(set(names))
        assert sum(n in whole for n in names) >= 0.8 * len(names), (size, names)


def test_a_probe_of_a_fine_tune_finds_the_chunks_it_shares():
    """A quarter of the file rewritten: some window still falls on shared chunks."""
    data = random.Random(7).randbytes(32 * MiB)
    tuned = data[: 8 * MiB] + random.Random(8).randbytes(8 * MiB) + data[16 * MiB :]
    whole = {chunk_hash(c) for c in iter_chunks(PARAMS, iter([data]))}
    assert set(probe_names(PARAMS, memoryview(tuned), len(tuned))) & whole
    fresh = random.Random(9).randbytes(32 * MiB)
    assert not set(probe_names(PARAMS, memoryview(fresh), len(fresh))) & whole


def test_a_probe_of_a_stream_reads_its_first_window_only_and_closes_it():
    read: list[int] = []
    closed: list[bool] = []

    def pieces():
        try:
            for i in range(64):
                read.append(i)
                yield random.Random(i).randbytes(256 * 1024)
        finally:
            closed.append(True)

    names = probe_names(PARAMS, pieces(), 16 * MiB)
    assert names
    assert len(read) == PROBE_BYTES // (256 * 1024)
    assert closed == [True]
