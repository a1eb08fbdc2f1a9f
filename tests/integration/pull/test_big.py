"""A >= 1 GiB carton streams with bounded memory (service level, and Range/HEAD over HTTP)."""

from __future__ import annotations

import hashlib
import random
import struct
import time
import tracemalloc

import pytest

from registry.services.export import build_carton
from tests.integration.pull.helpers import make_carton, push

MiB = 1 << 20
BIG_SIZE = 1024 * MiB + 12345  # a little over 1 GiB, not a multiple of the chunk size
TAIL = 66 * 1024


def generated_chunks(size: int = BIG_SIZE):
    """Deterministic bytes: a random 1 MiB block, each copy stamped with its index."""
    base = random.Random(1234).randbytes(MiB)
    for i, offset in enumerate(range(0, size, MiB)):
        block = struct.pack("<Q", i) + base[8:]
        yield block[: min(MiB, size - offset)]


class GeneratedReader:
    def __init__(self) -> None:
        self._chunks = generated_chunks()
        self._buf = b""

    def read(self, n: int = -1) -> bytes:
        while (n < 0 or len(self._buf) < n) and (chunk := next(self._chunks, None)) is not None:
            self._buf += chunk
        if n < 0:
            out, self._buf = self._buf, b""
        else:
            out, self._buf = self._buf[:n], self._buf[n:]
        return out


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite-fs"], indirect=True)
def test_one_gib_carton_streams_with_bounded_memory(client, registry_ctx):
    started = time.monotonic()
    h = hashlib.sha256()
    blob_tail = b""
    for chunk in generated_chunks():
        h.update(chunk)
        blob_tail = (blob_tail + chunk)[-TAIL:]
    big_sha = h.hexdigest()
    put = registry_ctx.blobs.put(big_sha, GeneratedReader(), size_hint=BIG_SIZE)  # type: ignore[arg-type]
    assert put.size == BIG_SIZE

    # A small carton whose MANIFEST names the big file, absent from the zip: ingest
    # resolves it from the store.
    data = make_carton({"model/small.txt": b"hello\n"}, absent={"model/weights.bin": big_sha})
    pushed = push(client, data)
    assert pushed["bytes_total"] > BIG_SIZE
    manifest_sha = pushed["manifest_sha256"]

    exported = build_carton(registry_ctx, manifest_sha, "full")
    assert exported.size > BIG_SIZE
    tracemalloc.start()
    try:
        out = hashlib.sha256()
        n = 0
        tail = b""
        for chunk in exported.layout.iter_bytes():
            out.update(chunk)
            n += len(chunk)
            tail = (tail + chunk)[-TAIL:]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert n == exported.size
    assert peak < 64 * MiB, f"peak {peak / MiB:.1f} MiB"

    # Over HTTP: the carton loader's HEAD, then the last 66 KiB by Range.
    url = f"/cartons/{manifest_sha}.carton?form=full"
    head = client.head(url)
    assert head.status_code == 200
    assert int(head.headers["content-length"]) == exported.size
    r = client.get(url, headers={"Range": f"bytes=-{TAIL}"})
    assert r.status_code == 206
    assert r.content == tail
    assert r.headers["content-range"] == (
        f"bytes {exported.size - TAIL}-{exported.size - 1}/{exported.size}"
    )
    # A range into the big member (its data starts within the first KiB or so).
    first_mib = next(generated_chunks())
    r = client.get(url, headers={"Range": f"bytes=0-{2 * MiB}"})
    assert r.status_code == 206 and len(r.content) == 2 * MiB + 1
    assert first_mib[:4096] in r.content

    # The slim carton links the big file and stays small.
    slim = client.get(f"/cartons/{manifest_sha}.carton")
    assert slim.status_code == 200 and len(slim.content) < 64 * 1024
    assert f"/blobs/{big_sha}".encode() in slim.content
    r = client.head(f"/blobs/{big_sha}")
    assert int(r.headers["content-length"]) == BIG_SIZE
    r = client.get(f"/blobs/{big_sha}", headers={"Range": f"bytes=-{TAIL}"})
    assert r.status_code == 206 and r.content == blob_tail
    assert time.monotonic() - started < 60
