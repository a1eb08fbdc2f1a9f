"""What one chunk request may cost (issue 24), on both backend pairs: uploads are counted
by records as well as bytes, assemblies that could not be a file's FastCDC cut or that
repeat too few chunks too often are refused before a byte is hashed, and errors say
nothing about stored chunks the caller did not send."""

from __future__ import annotations

import hashlib
import json
import os
import random
import struct

import pytest

from registry.chunking import chunk_hash
from registry.services import chunk_transfer
from tests.integration.api.test_chunks import chunks_of, records
from tests.integration.hardening.memory import MiB, peak_rss

KiB = 1024


def tiny_records(total: int, seed: int = 1) -> tuple[bytes, list[str]]:
    """About ``total`` bytes of records whose chunks are 1 to 8 bytes, and their names."""
    rng = random.Random(seed)
    parts, names, size, i = [], [], 0, 0
    while size < total:
        data = i.to_bytes(8, "big")[-rng.randint(1, 8) :] + bytes([i % 251])
        name = chunk_hash(data)
        parts.append(struct.pack(">32sI", bytes.fromhex(name), len(data)) + data)
        names.append(name)
        size += 36 + len(data)
        i += 1
    return b"".join(parts), names


def assemble(client, sha: str, size: int, names: list[str]):
    return client.post(f"/api/v1/blobs/{sha}/assemble", json={"size": size, "chunks": names})


class Spy:
    """Counts the calls of the function it stands in for."""

    def __init__(self, real):
        self.real, self.calls = real, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.real(*args, **kwargs)


@pytest.fixture
def hashing(monkeypatch) -> Spy:
    """Reading chunks back to hash them, as an assembly does once its list passed."""
    spy = Spy(chunk_transfer.iter_file)
    monkeypatch.setattr(chunk_transfer, "iter_file", spy)
    return spy


def test_a_body_of_tiny_records_is_refused_early_and_cheaply(client, registry_ctx):
    """24 MiB of 1-8-byte records (about 600,000) once cost 700 MiB and were stored: now
    the upload stops at the records cap, stores nothing, and memory stays flat."""
    terms = client.get("/api/v1/chunking").json()
    cap = chunk_transfer.MAX_BATCH_BYTES // registry_ctx.chunk_params.min_size
    assert terms["max_batch_records"] == cap
    body, names = tiny_records(24 * MiB)
    with peak_rss() as memory:
        r = client.post("/api/v1/chunks", content=body)
    assert r.status_code == 413, r.text
    assert f"at most {cap} records" in r.json()["error"]
    assert "min_size" in r.json()["error"]
    assert memory.growth < 150 * MiB, f"RSS grew {memory.growth / MiB:.0f} MiB"
    probe = names[:50] + names[cap - 50 : cap]
    assert client.post("/api/v1/chunks/missing", json={"chunks": probe}).json()["missing"] == probe


def records_of_count(count: int, seed: int) -> bytes:
    rng = random.Random(seed)
    return records([rng.randbytes(rng.randint(1, 64)) for _ in range(count)])


def test_short_records_count_as_min_size(client, registry_ctx):
    """A short record can only be a file's last chunk: it is charged min_size bytes, so an
    upload holds no more of them than of real chunks: tails of many files fit (cap of
    them are accepted), one more is refused."""
    cap = chunk_transfer.MAX_BATCH_BYTES // registry_ctx.chunk_params.min_size
    r = client.post("/api/v1/chunks", content=records_of_count(cap, seed=2))
    assert r.status_code == 200, r.text
    assert r.json()["chunks"] == cap
    r = client.post("/api/v1/chunks", content=records_of_count(cap + 1, seed=3))
    assert r.status_code == 413


def test_one_chunk_named_8192_times_is_refused_before_anything_is_read(client, hashing):
    """The issue's amplification: 256 KiB stored, named 8,192 times (2 GiB) with a wrong
    sha256. Refused from the request alone, before any lookup or hashing."""
    chunk = os.urandom(256 * KiB)
    assert client.post("/api/v1/chunks", content=records([chunk])).status_code == 200
    wrong = hashlib.sha256(b"not it").hexdigest()
    r = assemble(client, wrong, 8192 * len(chunk), [chunk_hash(chunk)] * 8192)
    assert r.status_code == 413, r.text
    assert "REGISTRY_MAX_ASSEMBLE_RATIO" in r.json()["error"]
    assert hashing.calls == 0
    assert client.head(f"/blobs/{wrong}").status_code == 404


@pytest.mark.settings(max_assemble_ratio=4, assemble_ratio_min_bytes=MiB)
def test_repeats_of_small_chunks_are_refused_after_the_lookup_before_hashing(client, hashing):
    """Four distinct 20 KiB chunks repeated 25 times (2000 KiB, 25x their bytes): past what
    the request alone shows, the stored sizes tell, still before a byte is hashed."""
    chunks = [os.urandom(20 * KiB) for _ in range(4)]
    client.post("/api/v1/chunks", content=records(chunks))
    names = [chunk_hash(c) for c in chunks] * 25
    data = b"".join(chunks) * 25
    r = assemble(client, hashlib.sha256(data).hexdigest(), len(data), names)
    assert r.status_code == 413 and "REGISTRY_MAX_ASSEMBLE_RATIO" in r.json()["error"]
    assert hashing.calls == 0


def test_lists_that_cannot_be_a_cut_are_refused_before_hashing(client, registry_ctx, hashing):
    short, long = os.urandom(KiB), os.urandom(100 * KiB)
    client.post("/api/v1/chunks", content=records([short, long]))
    names = [chunk_hash(short), chunk_hash(long)]
    right = hashlib.sha256(short + long).hexdigest()
    r = assemble(client, right, len(short + long), names)
    assert r.status_code == 400
    assert "chunk 0 of the list is shorter than min_size" in r.json()["error"]
    r = assemble(client, right, 10 * MiB, names)  # two chunks cannot make 10 MiB
    assert r.status_code == 400 and "cannot make" in r.json()["error"]
    too_big = registry_ctx.settings.max_upload_bytes + 1
    r = assemble(client, right, too_big, names * 300_000)
    assert r.status_code == 413 and "REGISTRY_MAX_UPLOAD_BYTES" in r.json()["error"]
    assert hashing.calls == 0
    data = long + short  # the short one last: a file's tail
    r = assemble(client, hashlib.sha256(data).hexdigest(), len(data), names[::-1])
    assert r.status_code == 200, r.text
    assert client.get(f"/blobs/{hashlib.sha256(data).hexdigest()}").content == data


def test_errors_name_the_request_not_the_stored_chunks(client, hashing):
    data = os.urandom(MiB)
    chunks = chunks_of(client, data)
    names = [chunk_hash(c) for c in chunks]
    client.post("/api/v1/chunks", content=records(chunks))
    wrong = hashlib.sha256(b"claimed").hexdigest()
    r = assemble(client, wrong, len(data), names)
    assert r.status_code == 400
    assert r.json() == {
        "error": f"the chunks named do not reassemble to sha256 {wrong}",
        "sha256_mismatch": True,
    }
    assert hashing.calls == 1
    r = assemble(client, wrong, len(data) - 1, names)
    assert r.status_code == 400 and str(len(data)) not in json.dumps(r.json())
    assert hashlib.sha256(data).hexdigest() not in r.text
    assert hashing.calls == 1  # sizes that do not add up are refused before hashing


def safetensors(tensors: list[tuple[str, bytes]]) -> bytes:
    """A safetensors file: an 8-byte header length, the JSON header, the tensors' bytes."""
    header, offset = {}, 0
    for name, data in tensors:
        header[name] = {"dtype": "F32", "shape": [len(data) // 4], "data_offsets": [offset]}
        header[name]["data_offsets"].append(offset + len(data))
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(data for _, data in tensors)


def upload_and_assemble(client, data: bytes):
    chunks = chunks_of(client, data)
    unique = list({chunk_hash(c): c for c in chunks}.values())
    for start in range(0, len(unique), 200):
        r = client.post("/api/v1/chunks", content=records(unique[start : start + 200]))
        assert r.status_code == 200, r.text
    names = [chunk_hash(c) for c in chunks]
    return assemble(client, hashlib.sha256(data).hexdigest(), len(data), names)


@pytest.mark.settings(max_assemble_ratio=16, assemble_ratio_min_bytes=MiB)
def test_weights_with_zero_filled_tensors_still_assemble(client):
    """Zeros cut into max_size chunks that repeat: a mixture-of-experts file whose experts
    but one are all zero (about 6x its distinct bytes) assembles; a file that is nearly
    all one repeated chunk (about 64x) is refused, and goes whole instead. (The limits
    are scaled down here, 16x past 1 MiB, to keep the files small.)"""
    experts = [("e0", os.urandom(2 * MiB))] + [(f"e{i}", bytes(2 * MiB)) for i in range(1, 8)]
    moe = safetensors(experts)
    r = upload_and_assemble(client, moe)
    assert r.status_code == 200, r.text
    assert client.get(f"/blobs/{hashlib.sha256(moe).hexdigest()}").content == moe
    zeros = safetensors([(f"m{i}", bytes(8 * MiB)) for i in range(4)])
    r = upload_and_assemble(client, zeros)
    assert r.status_code == 413 and "upload it whole" in r.json()["error"]
    sha = hashlib.sha256(zeros).hexdigest()
    r = client.put(f"/api/v1/blobs/{sha}", content=zeros)
    assert r.status_code == 201
    assert client.get(f"/blobs/{sha}").content == zeros
