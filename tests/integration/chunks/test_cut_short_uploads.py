"""A blob upload whose body stops short keeps its whole chunks (docs/chunk-transfer.md), on
both backend pairs, through a real server: a client that runs its push again sends only
the rest. What is kept is no file, and GC takes it after its grace period."""

from __future__ import annotations

import hashlib
import random
import socket
import time

import httpx

from registry.chunking import chunk_hash, iter_chunks
from registry.services import chunk_transfer
from registry.services.gc import collect_garbage
from tests.helpers import pushes_settled

MiB = 1 << 20


def start_put(port: int, data: bytes, declared: int) -> socket.socket:
    """A PUT of ``data`` announced as ``declared`` bytes, left open."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    head = (
        f"PUT /api/v1/blobs/{hashlib.sha256(data).hexdigest()} HTTP/1.1\r\nHost: x\r\n"
        f"Content-Type: application/octet-stream\r\nContent-Length: {declared}\r\n\r\n"
    )
    sock.sendall(head.encode())
    return sock


def canonical_chunks(ctx, data: bytes) -> dict[str, int]:
    return {chunk_hash(c): len(c) for c in iter_chunks(ctx.chunk_params, iter([data]))}


def stored_of(ctx, chunks: dict[str, int]) -> int:
    missing = set(chunk_transfer.missing_chunks(ctx, list(chunks)))
    return sum(n for name, n in chunks.items() if name not in missing)


def kept_once_settled(ctx, chunks: dict[str, int], at_least: int, timeout: float = 30) -> int:
    """What the server kept of ``chunks`` once its upload is over. The client is gone as
    soon as its bytes are in the socket buffers, which hold megabytes: the server may not
    have taken a lease yet, so no lease (``pushes_settled``) proves nothing until what it
    keeps has appeared (``at_least`` bytes), or ``timeout`` has passed."""
    deadline = time.monotonic() + timeout
    while stored_of(ctx, chunks) < at_least and time.monotonic() < deadline:
        time.sleep(0.05)
    pushes_settled(ctx)
    return stored_of(ctx, chunks)


def test_an_upload_cut_short_keeps_the_chunks_it_cut_and_makes_no_file(live_server):
    ctx = live_server.ctx
    data = random.Random(1).randbytes(24 * MiB)
    sent = 16 * MiB
    sock = start_put(live_server.port, data, len(data))
    sock.sendall(data[:sent])
    sock.close()  # the client goes away mid-body

    chunks = canonical_chunks(ctx, data)
    kept = kept_once_settled(ctx, chunks, 8 * MiB)
    # Everything that arrived but the tail the chunker still carried (at most one chunk
    # per MiB-sized join: the server may not have read the last few MiB before the close).
    assert 8 * MiB <= kept <= sent, kept
    assert stored_of(ctx, canonical_chunks(ctx, data[sent:])) == 0
    sha = hashlib.sha256(data).hexdigest()
    assert httpx.head(f"{live_server.url}/blobs/{sha}").status_code == 404
    missing = httpx.post(f"{live_server.url}/api/v1/blobs/missing", json={"sha256": [sha]})
    assert missing.json()["missing"] == [sha]

    # The whole file, sent again, is stored from the kept chunks and the rest.
    put = httpx.put(f"{live_server.url}/api/v1/blobs/{sha}", content=data, timeout=60)
    assert put.status_code == 201, put.text
    assert put.json()["bytes_stored"] <= len(data) - kept + 256 * 1024
    assert httpx.get(f"{live_server.url}/blobs/{sha}", timeout=60).content == data


def test_what_an_upload_cut_short_kept_goes_at_gc_when_nothing_uses_it(live_server):
    ctx = live_server.ctx
    data = random.Random(2).randbytes(12 * MiB)
    sock = start_put(live_server.port, data, len(data) + MiB)  # announces more than it sends
    sock.sendall(data)
    sock.close()
    chunks = canonical_chunks(ctx, data)
    assert kept_once_settled(ctx, chunks, 4 * MiB) >= 4 * MiB

    collect_garbage(ctx, grace_seconds=3600)  # within the grace period: kept
    assert stored_of(ctx, chunks) >= 4 * MiB
    collect_garbage(ctx, grace_seconds=0)
    assert stored_of(ctx, chunks) == 0


def test_an_upload_whose_bytes_are_not_its_name_keeps_nothing(live_server):
    """Cut short is kept; complete but wrong is refused with nothing kept, as before."""
    ctx = live_server.ctx
    data = random.Random(3).randbytes(12 * MiB)
    wrong = hashlib.sha256(b"something else").hexdigest()
    put = httpx.put(f"{live_server.url}/api/v1/blobs/{wrong}", content=data, timeout=60)
    assert put.status_code == 400 and "digest mismatch" in put.json()["error"]
    pushes_settled(ctx)
    assert stored_of(ctx, canonical_chunks(ctx, data)) == 0
