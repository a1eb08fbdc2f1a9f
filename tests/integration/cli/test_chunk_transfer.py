"""Push and pull by chunks through the CLI (docs/chunk-transfer.md), on both backend pairs.

Bytes are counted on the wire by a TCP proxy between the CLI and the live server
(``bench.harness.proxy``), so whatever the client does is counted.
"""

from __future__ import annotations

import random
import signal
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.harness.proxy import CountingProxy
from registry.chunking import ChunkParams, chunk_hash, iter_chunks
from registry.client import ClientError, RegistryClient, cut_upload
from registry.client import chunks as client_chunks
from registry.services import chunk_transfer
from registry.services.deletes import delete_version
from registry.services.gc import collect_garbage
from tests.helpers import pushes_settled
from tests.integration.cli.conftest import (
    assert_full_and_valid,
    manifest_hash,
    member_bytes,
    relinked,
)
from tests.integration.cli.test_push_variant import write_big_carton

MiB = 1 << 20
WEIGHTS = "model/weights.bin"
SLACK = 4 * MiB
"""What a transfer may cost beyond the changed bytes: chunk lists, JSON, headers, edges."""


def randbytes(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


def with_region(base: bytes, seed: int, at: int, size: int) -> bytes:
    """``base`` with ``size`` bytes at ``at`` rewritten."""
    return base[:at] + randbytes(seed, size) + base[at + size :]


def carton(tmp_path: Path, name: str, weights: bytes, extra: bytes = b"extra") -> Path:
    path = tmp_path / f"{name}.carton"
    write_big_carton(path, {WEIGHTS: weights, "model/extra.txt": extra})
    return path


@pytest.fixture
def proxy(live_server) -> Iterator[CountingProxy]:
    counting = CountingProxy(live_server.port)
    try:
        yield counting
    finally:
        counting.close()


def counted(proxy: CountingProxy) -> tuple[int, int]:
    """(up, down) bytes since the last reset, once the proxy's pumps caught up."""
    time.sleep(0.2)
    return proxy.up, proxy.down


def push(cli, proxy: CountingProxy, path: Path) -> tuple[int, object]:
    proxy.reset()
    run = cli("push", str(path), "--url", proxy.url)
    assert run.code == 0, run.err
    assert run.last_line == manifest_hash(path)
    return counted(proxy)[0], run


def missing_bytes(ctx, data: bytes) -> int:
    """Bytes of ``data``'s chunks the registry does not hold."""
    chunks = {chunk_hash(c): len(c) for c in iter_chunks(ctx.chunk_params, iter([data]))}
    return sum(chunks[n] for n in chunk_transfer.missing_chunks(ctx, list(chunks)))


# -- push ---------------------------------------------------------------------------------


def test_a_variant_push_sends_about_the_changed_region(cli, live_server, proxy, tmp_path):
    base = randbytes(1, 48 * MiB)
    up, run = push(cli, proxy, carton(tmp_path, "v1", base))
    assert 48 * MiB <= up <= 48 * MiB + SLACK
    assert "; 0 B already in the registry" in run.out.splitlines()[-2], run.out
    # Nothing of it was stored: it went whole, cut by the registry, not here.
    assert run.client.count("PUT", f"/api/v1/blobs/{sha256(base)}") == 1
    assert run.client.count("POST", "/api/v1/chunks", "/chunks") == 0
    assert run.client.count("POST", "/api/v1/chunks/missing") == 1  # the probe

    changed = 4 * MiB
    variant = with_region(base, 2, 20 * MiB, changed)
    up, run = push(cli, proxy, carton(tmp_path, "v2", variant))
    assert up <= 1.5 * changed + SLACK, up
    assert run.client.count("PUT") == 0
    assert run.client.count("POST", "/api/v1/blobs/", "/assemble") == 1
    sent, rest = run.out.splitlines()[-2].removeprefix("sent ").split(" of ")
    assert rest.endswith("already in the registry"), run.out
    assert float(sent.split()[0]) <= 6.5 and sent.endswith("MiB"), run.out
    # The summary agrees with itself: a whole new file, a few MiB of it stored and sent.
    files_line = next(line for line in run.out.splitlines() if line.startswith("files: "))
    assert "48.0 MiB in new files" in files_line, run.out
    stored = files_line.rsplit("; ", 1)[1]
    assert stored.endswith("MiB stored after chunk dedup"), run.out
    assert float(stored.split()[0]) <= 6.5, run.out
    got = httpx.get(f"{live_server.url}/blobs/{sha256(variant)}", timeout=60).content
    assert got == variant


def sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_an_interrupted_push_run_again_sends_only_the_rest(
    cli, live_server, proxy, tmp_path, monkeypatch, as_chunks
):
    weights = randbytes(3, 48 * MiB)
    path = carton(tmp_path, "big", weights)
    real = RegistryClient.post_chunks
    calls = {"n": 0}
    lock = threading.Lock()

    def drop_after_one(self, parts, size):  # type: ignore[no-untyped-def]
        with lock:
            calls["n"] += 1
            if calls["n"] > 1:
                raise ClientError("the network went away")
        return real(self, parts, size)

    monkeypatch.setattr(RegistryClient, "post_chunks", drop_after_one)
    proxy.reset()
    run = cli("push", str(path), "--url", proxy.url)
    assert run.code == 1 and "the network went away" in run.err
    first_up, _ = counted(proxy)
    lacking = missing_bytes(live_server.ctx, weights)
    assert 0 < lacking < len(weights)

    monkeypatch.setattr(RegistryClient, "post_chunks", real)
    up, _ = push(cli, proxy, path)
    assert up <= lacking + SLACK, (up, lacking)
    assert first_up + up <= len(weights) + 2 * SLACK


def gone_after(limit: int, pieces: Iterator[bytes]) -> Iterator[bytes]:
    """An upload's body whose connection goes away once ``limit`` bytes are sent."""
    sent = 0
    for piece in pieces:
        yield piece
        sent += len(piece)
        if sent >= limit:
            raise ClientError("the network went away")


def test_an_interrupted_whole_upload_run_again_sends_only_the_rest(
    cli, live_server, proxy, tmp_path, monkeypatch
):
    """A fresh file goes whole; cut short, its upload leaves the registry the chunks it
    had cut, and the push run again finds them (its probe) and sends the rest as chunks."""
    weights = randbytes(8, 48 * MiB)
    path = carton(tmp_path, "cut", weights)
    real = RegistryClient.put_blob

    def cut_short(self, sha, pieces, size, *how):  # type: ignore[no-untyped-def]
        return real(self, sha, gone_after(24 * MiB, pieces), size, *how)

    monkeypatch.setattr(RegistryClient, "put_blob", cut_short)
    proxy.reset()
    run = cli("push", str(path), "--url", proxy.url)
    assert run.code == 1 and "the network went away" in run.err
    assert run.client.count("PUT", f"/api/v1/blobs/{sha256(weights)}") == 1
    pushes_settled(live_server.ctx)
    first_up, _ = counted(proxy)
    lacking = missing_bytes(live_server.ctx, weights)
    assert lacking <= len(weights) - 16 * MiB  # most of what arrived was kept
    head = httpx.head(f"{live_server.url}/blobs/{sha256(weights)}")
    assert head.status_code == 404  # chunks only: no file was made of them

    monkeypatch.setattr(RegistryClient, "put_blob", real)
    up, run = push(cli, proxy, path)
    assert run.client.count("PUT", f"/api/v1/blobs/{sha256(weights)}") == 0
    assert up <= lacking + SLACK, (up, lacking)
    assert first_up + up <= len(weights) + 2 * SLACK
    got = httpx.get(f"{live_server.url}/blobs/{sha256(weights)}", timeout=60).content
    assert got == weights


def test_an_interrupted_upload_of_several_files_run_again_sends_only_the_rest(
    cli, live_server, proxy, tmp_path, monkeypatch
):
    """Cut short inside its second file, an upload of several files leaves the registry
    the whole chunks of both (no file is made of them); the push run again sends the
    rest as chunks."""
    files = {f"model/part-{i}.bin": randbytes(120 + i, 8 * MiB) for i in range(3)}
    path = tmp_path / "cut-several.carton"
    write_big_carton(path, files)
    real = RegistryClient.put_blobs

    def cut_short(self, pieces, size, *how):  # type: ignore[no-untyped-def]
        return real(self, gone_after(12 * MiB, pieces), size, *how)

    monkeypatch.setattr(RegistryClient, "put_blobs", cut_short)
    run = cli("push", str(path), "--url", proxy.url)
    assert run.code == 1 and "the network went away" in run.err
    assert run.client.count("POST", "/api/v1/blobs", "/blobs") == 1
    pushes_settled(live_server.ctx)
    batched = [files["model/part-1.bin"], files["model/part-2.bin"]]
    for data in batched:
        head = httpx.head(f"{live_server.url}/blobs/{sha256(data)}")
        assert head.status_code == 404  # chunks only: no file was made of them
    assert missing_bytes(live_server.ctx, batched[0]) <= 2 * MiB  # most of it was kept
    lacking = sum(missing_bytes(live_server.ctx, data) for data in batched)

    monkeypatch.setattr(RegistryClient, "put_blobs", real)
    up, run = push(cli, proxy, path)
    assert run.client.count("POST", "/api/v1/blobs", "/blobs") == 0
    assert up <= lacking + SLACK, (up, lacking)
    for data in files.values():
        assert httpx.get(f"{live_server.url}/blobs/{sha256(data)}").content == data


def test_a_killed_push_run_again_sends_only_the_rest(installed, live_server, proxy, tmp_path):
    weights = randbytes(4, 128 * MiB)
    path = carton(tmp_path, "killed", weights)
    proxy.reset()
    proc = installed.start("push", str(path), "--url", proxy.url)
    deadline = time.monotonic() + 60
    in_flight = client_chunks.UPLOAD_WORKERS * client_chunks.BATCH_BYTES  # 64 MiB
    # Past that much and 32 MiB more on the wire, at least 32 MiB have been stored.
    while proxy.up < in_flight + 32 * MiB and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the push ended before it could be killed"
    pushes_settled(live_server.ctx)
    lacking = missing_bytes(live_server.ctx, weights)
    assert lacking <= len(weights) - 32 * MiB  # what arrived before the kill stays

    proxy.reset()
    run = installed("push", str(path), "--url", proxy.url)
    assert run.code == 0, run.err
    assert run.last_line == manifest_hash(path)
    up, _ = counted(proxy)
    assert up <= lacking + SLACK, (up, lacking)


def test_pushes_racing_gc_with_no_grace_all_succeed(cli, live_server, tmp_path, monkeypatch):
    """GC with --grace 0s in a loop takes unassembled chunks, unreferenced files and the
    previous version's packs while CLI and REST pushes of variants go on."""
    if live_server.ctx.settings.blob_store.startswith("s3://"):
        # moto lists every multipart upload as initiated in 2010 (moto/s3/responses.py), so
        # GC would abort the packs being written, which real S3 reports seconds old.
        monkeypatch.setattr(live_server.ctx.blobs, "clean_stale_uploads", lambda _: 0)
    stop = threading.Event()
    errors: list[BaseException] = []
    rounds = {"n": 0}

    def collect() -> None:
        while not stop.is_set():
            try:
                collect_garbage(live_server.ctx, grace_seconds=0)
                rounds["n"] += 1
            except BaseException as exc:  # reported by the test
                errors.append(exc)
                return

    base = randbytes(5, 16 * MiB)
    pushed: list[tuple[str, bytes]] = []
    collector = threading.Thread(target=collect, daemon=True)
    collector.start()
    try:
        for i in range(4):  # CLI, REST, CLI, REST: each with GC running throughout
            weights = with_region(base, 100 + i, (i + 1) * 3 * MiB, MiB)
            path = carton(tmp_path, f"race-{i}", weights, extra=f"extra {i}".encode())
            if i % 2 == 0:
                run = cli("push", str(path), "--url", live_server.url)
                assert run.code == 0, run.err
                assert run.last_line == manifest_hash(path)
            else:
                r = httpx.post(
                    f"{live_server.url}/api/v1/cartons", content=path.read_bytes(), timeout=120
                )
                assert r.status_code in (200, 201), r.text
            pushed.append((manifest_hash(path), weights))
            if i:
                delete_version(live_server.ctx, "big-model", i)  # the previous one: garbage
    finally:
        stop.set()
        collector.join(timeout=60)
    assert not errors, errors
    assert rounds["n"] >= 2
    _, weights = pushed[-1]
    assert httpx.get(f"{live_server.url}/blobs/{sha256(weights)}", timeout=60).content == weights


def test_chunks_collected_before_the_assembly_are_sent_again(
    cli, live_server, tmp_path, monkeypatch, as_chunks
):
    """One GC run between the chunk uploads and the assembly: the lost chunks go again."""
    real = RegistryClient.assemble_blob
    calls: list[str] = []

    def collect_first(self, sha, size, names):  # type: ignore[no-untyped-def]
        calls.append(sha)
        if len(calls) == 1:
            collect_garbage(live_server.ctx, grace_seconds=0)  # the chunks are in no file yet
        return real(self, sha, size, names)

    monkeypatch.setattr(RegistryClient, "assemble_blob", collect_first)
    weights = randbytes(15, 4 * MiB)
    run = cli("push", str(carton(tmp_path, "collected", weights)), "--url", live_server.url)
    assert run.code == 0, run.err
    assert "sending it whole" not in run.err
    assert calls == [sha256(weights)] * 2
    assert run.client.bytes_sent >= 2 * len(weights)  # every chunk, twice
    got = httpx.get(f"{live_server.url}/blobs/{sha256(weights)}", timeout=60).content
    assert got == weights


def test_a_tampered_chunk_upload_is_refused_and_stores_nothing(
    cli, live_server, tmp_path, monkeypatch, as_chunks
):
    weights = randbytes(6, 2 * MiB)
    real = client_chunks.records

    def tampered(chunks):  # type: ignore[no-untyped-def]
        body = bytearray(b"".join(real(chunks)))
        body[-1] ^= 0xFF
        return [bytes(body)]

    monkeypatch.setattr(client_chunks, "records", tampered)
    run = cli("push", str(carton(tmp_path, "tampered", weights)), "--url", live_server.url)
    assert run.code == 1
    assert "HTTP 400" in run.err and "hash to" in run.err
    assert missing_bytes(live_server.ctx, weights) == len(weights)
    head = httpx.head(f"{live_server.url}/blobs/{sha256(weights)}")
    assert head.status_code == 404


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_a_chunked_file_that_is_not_what_its_manifest_says_is_refused_in_the_same_words(
    cli, live_server, tmp_path, compression
):
    """The CLI does not hash chunked files whole: the registry checks the file it
    reassembles, and the push fails as a local check would have said it, storing nothing
    under the sha256 MANIFEST names."""
    weights, other = randbytes(21, 3 * MiB), randbytes(22, 3 * MiB)
    good = carton(tmp_path, "stale-chunks", weights)
    stale = tmp_path / "stale.carton"
    with zipfile.ZipFile(good) as z:
        members = {n: z.read(n) for n in z.namelist()}
    members[WEIGHTS] = other
    with zipfile.ZipFile(stale, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    run = cli("push", str(stale), "--url", live_server.url)
    assert run.code == 1
    assert f"{stale}: {WEIGHTS}: content hashes to {sha256(other)}, but MANIFEST says " in run.err
    assert sha256(weights) in run.err
    assert httpx.head(f"{live_server.url}/blobs/{sha256(weights)}").status_code == 404
    assert httpx.head(f"{live_server.url}/blobs/{sha256(other)}").status_code == 404


def test_a_file_that_could_be_over_max_assemble_chunks_is_sent_whole(
    cli, live_server, tmp_path, monkeypatch
):
    """Assembling takes at most max_assemble chunk names: a file that could cut into more
    (at the smallest chunks) goes in one PUT."""
    monkeypatch.setattr(chunk_transfer, "MAX_ASSEMBLE", 8)
    weights = randbytes(7, MiB)
    run = cli("push", str(carton(tmp_path, "whole", weights)), "--url", live_server.url)
    assert run.code == 0, run.err
    assert run.client.count("PUT", f"/api/v1/blobs/{sha256(weights)}") == 1
    assert run.client.count("POST", "/api/v1/chunks") == 0


def test_a_file_of_more_chunks_than_a_query_takes_is_still_sent_as_chunks(
    cli, live_server, tmp_path, monkeypatch, as_chunks
):
    """Missing-chunk queries go in batches of max_query; one assembly takes them all."""
    monkeypatch.setattr(chunk_transfer, "MAX_QUERY", 4)
    weights = randbytes(30, MiB)
    run = cli("push", str(carton(tmp_path, "many", weights)), "--url", live_server.url)
    assert run.code == 0, run.err
    assert run.client.count("PUT", f"/api/v1/blobs/{sha256(weights)}") == 0
    assert run.client.count("POST", "/api/v1/chunks/missing") > 2
    assert run.client.count("POST", f"/api/v1/blobs/{sha256(weights)}/assemble") == 1
    assert httpx.get(f"{live_server.url}/blobs/{sha256(weights)}").content == weights


def test_a_registry_without_chunk_transfer_gets_every_file_whole(
    cli, live_server, tmp_path, monkeypatch
):
    """A registry that predates /api/v1/chunking (404) still takes pushes."""

    def no_chunking(self):  # type: ignore[no-untyped-def]
        raise ClientError("GET /api/v1/chunking: HTTP 404 not found", status=404)

    monkeypatch.setattr(RegistryClient, "chunking", no_chunking)
    weights = randbytes(31, 2 * MiB)
    run = cli("push", str(carton(tmp_path, "old", weights)), "--url", live_server.url)
    assert run.code == 0, run.err
    assert run.client.count("PUT", f"/api/v1/blobs/{sha256(weights)}") == 1
    assert run.client.count("POST", "/api/v1/chunks") == 0
    assert httpx.get(f"{live_server.url}/blobs/{sha256(weights)}").content == weights

    def broken(self):  # type: ignore[no-untyped-def]
        raise ClientError("GET /api/v1/chunking: HTTP 503 unavailable", status=503)

    monkeypatch.setattr(RegistryClient, "chunking", broken)
    run = cli(
        "push", str(carton(tmp_path, "down", randbytes(32, 2 * MiB))), "--url", live_server.url
    )
    assert run.code == 1 and "503" in run.err


def test_a_repush_of_the_same_file_reads_none_of_its_members(
    cli, live_server, tmp_path, monkeypatch
):
    from registry.client.members import LocalCarton

    path = carton(tmp_path, "same", randbytes(8, 4 * MiB))
    assert cli("push", str(path), "--url", live_server.url).code == 0
    opened: list[str] = []
    real = LocalCarton.source

    def spy(self, member):  # type: ignore[no-untyped-def]
        opened.append(member)
        return real(self, member)

    monkeypatch.setattr(LocalCarton, "source", spy)
    again = cli("push", str(path), "--url", live_server.url)
    assert again.code == 0, again.err
    assert WEIGHTS not in opened  # verified by the first push, unchanged since
    opened.clear()
    again = cli("push", "--no-cache", str(path), "--url", live_server.url)
    assert again.code == 0, again.err
    assert WEIGHTS in opened


def test_a_file_changed_after_a_push_is_verified_again(cli, live_server, tmp_path):
    path = carton(tmp_path, "stale", randbytes(9, 4 * MiB))
    assert cli("push", str(path), "--url", live_server.url).code == 0
    data = bytearray(path.read_bytes())
    at = data.index(randbytes(9, 4 * MiB)[:64]) + MiB
    data[at] ^= 1  # same size; the zip's CRC no longer matches either
    path.write_bytes(bytes(data))
    run = cli("push", str(path), "--url", live_server.url)
    assert run.code == 1
    assert WEIGHTS in run.err


# -- pull and hydrate with a chunk cache ---------------------------------------------------


def pull_full(cli, proxy: CountingProxy, ref: str, out: Path, *extra: str) -> tuple[int, object]:
    proxy.reset()
    run = cli("pull", ref, "--full", "-o", str(out), "--url", proxy.url, *extra)
    assert run.code == 0, run.err
    assert run.last_line == ref
    return counted(proxy)[1], run


def cache_files(root: Path) -> list[Path]:
    return sorted(p for p in (root / "carton-registry" / "chunks").rglob("*") if p.is_file())


def test_a_pull_with_a_warm_cache_fetches_only_new_chunks(
    cli, live_server, proxy, tmp_path, monkeypatch
):
    cache_root = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_root))
    base = randbytes(10, 40 * MiB)
    v1 = carton(tmp_path, "p1", base)
    assert cli("push", str(v1), "--url", live_server.url).code == 0
    down, run = pull_full(cli, proxy, manifest_hash(v1), tmp_path / "p1-full.carton")
    assert 40 * MiB <= down <= 40 * MiB + SLACK
    assert_full_and_valid(tmp_path / "p1-full.carton", manifest_hash(v1))
    assert "0 B from the local cache" in run.out
    assert sum(p.stat().st_size for p in cache_files(cache_root)) == len(base)

    changed = 2 * MiB
    variant = with_region(base, 11, 30 * MiB, changed)
    v2 = carton(tmp_path, "p2", variant)
    assert cli("push", str(v2), "--url", live_server.url).code == 0
    out = tmp_path / "p2-full.carton"
    down, run = pull_full(cli, proxy, manifest_hash(v2), out)
    assert down <= 1.5 * changed + SLACK, down
    assert_full_and_valid(out, manifest_hash(v2))
    assert member_bytes(out) == member_bytes(v2)
    assert "from the local cache" in run.out

    # Without the cache: the registry's own full carton, every byte over the wire.
    down, _ = pull_full(cli, proxy, manifest_hash(v2), out, "--no-cache")  # same bytes: kept
    assert down >= len(variant)
    assert member_bytes(out) == member_bytes(v2)


def test_damaged_cache_entries_are_detected_and_fetched_again(
    cli, live_server, proxy, tmp_path, monkeypatch
):
    cache_root = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_root))
    weights = randbytes(12, 8 * MiB)
    v1 = carton(tmp_path, "d1", weights)
    assert cli("push", str(v1), "--url", live_server.url).code == 0
    pull_full(cli, proxy, manifest_hash(v1), tmp_path / "warm.carton")
    entries = cache_files(cache_root)
    damaged = entries[::7]
    for entry in damaged:
        data = bytearray(entry.read_bytes())
        data[len(data) // 2] ^= 0xFF
        entry.write_bytes(bytes(data))
    damaged_bytes = sum(p.stat().st_size for p in damaged)

    out = tmp_path / "again.carton"
    down, _ = pull_full(cli, proxy, manifest_hash(v1), out)
    assert damaged_bytes <= down <= damaged_bytes + SLACK
    assert member_bytes(out) == member_bytes(v1)
    for entry in damaged:  # replaced by good copies
        assert chunk_hash(entry.read_bytes()) == entry.name


def test_hydrate_takes_the_cached_chunks_of_a_registry_link(
    cli, live_server, proxy, tmp_path, monkeypatch
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    base = randbytes(13, 24 * MiB)
    v1, v2 = carton(tmp_path, "h1", base), carton(tmp_path, "h2", with_region(base, 14, 0, MiB))
    for path in (v1, v2):
        assert cli("push", str(path), "--url", live_server.url).code == 0
    pull_full(cli, proxy, manifest_hash(v1), tmp_path / "h1-full.carton")  # warms the cache
    slim = tmp_path / "h2-slim.carton"
    assert cli("pull", manifest_hash(v2), "-o", str(slim), "--url", live_server.url).code == 0
    through_proxy = tmp_path / "h2-proxied.carton"
    relinked(slim, through_proxy, lambda sha: [f"{proxy.url}/blobs/{sha}"])

    proxy.reset()
    full = tmp_path / "h2-full.carton"
    run = cli("hydrate", str(through_proxy), "-o", str(full))
    assert run.code == 0, run.err
    down = counted(proxy)[1]
    assert down <= 1.5 * MiB + SLACK, down
    assert_full_and_valid(full, manifest_hash(v2))
    assert member_bytes(full) == member_bytes(v2)


def test_chunk_parameters_come_from_the_registry(live_server):
    with RegistryClient(live_server.url) as client:
        terms = client_chunks.ChunkTerms.fetch(client)
    assert terms.params == live_server.ctx.chunk_params
    assert isinstance(terms.params, ChunkParams)
    assert terms.min_file_bytes == live_server.ctx.settings.chunk_min_file_bytes


def test_the_chunk_cache_stays_under_its_cap(cli, live_server, proxy, tmp_path, monkeypatch):
    cache_root = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_root))
    monkeypatch.setenv("REGISTRY_CACHE_MAX_BYTES", str(2 * MiB))
    v1 = carton(tmp_path, "capped", randbytes(16, 8 * MiB))
    assert cli("push", str(v1), "--url", live_server.url).code == 0
    out = tmp_path / "capped-full.carton"
    pull_full(cli, proxy, manifest_hash(v1), out)
    assert member_bytes(out) == member_bytes(v1)
    kept = sum(p.stat().st_size for p in cache_files(cache_root))
    assert 0 < kept <= 2 * MiB


def terms_without(monkeypatch, key: str) -> None:
    """The registry's chunking terms without ``key``, as a registry that predates it
    announces them."""
    real = RegistryClient.chunking

    def older(self):  # type: ignore[no-untyped-def]
        body = dict(real(self))
        del body[key]
        return body

    monkeypatch.setattr(RegistryClient, "chunking", older)


def one_file_a_request(monkeypatch) -> None:
    """Each fresh file in a request of its own: no ``cut_files_type`` in the terms."""
    terms_without(monkeypatch, "cut_files_type")


def test_fresh_files_go_whole_one_body_on_the_wire_while_the_last_one_is_finished(
    cli, live_server, tmp_path, monkeypatch
):
    """Two whole uploads in flight at most, one of them sending its body: the next file's
    body goes while the registry finishes the one before (here: slowed down). Every piece
    of a body is handed to the connection by the thread that holds the wire (a count of
    bodies in progress would lag the wire's release by a few bytecodes, and once in a
    loaded suite saw the next body start in between)."""
    from registry.client import sender as sender_module
    from registry.services import blobs as blob_service

    real_service = blob_service.put_blob

    def slow_to_finish(*args, **kwargs):  # type: ignore[no-untyped-def]
        answer = real_service(*args, **kwargs)
        time.sleep(0.3)  # the registry's fsync and index transaction, drawn out
        return answer

    monkeypatch.setattr(blob_service, "put_blob", slow_to_finish)
    one_file_a_request(monkeypatch)

    class OwnedLock:
        """The Sender's wire lock, knowing which thread holds it."""

        def __init__(self) -> None:
            self._lock, self.owner = threading.Lock(), None

        def acquire(self) -> bool:
            self._lock.acquire()
            self.owner = threading.get_ident()
            return True

        def release(self) -> None:
            self.owner = None
            self._lock.release()

    wires: list[OwnedLock] = []
    real_init = sender_module.Sender.__init__

    def owned_wire(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        real_init(self, *args, **kwargs)
        self._wire = OwnedLock()
        wires.append(self._wire)

    monkeypatch.setattr(sender_module.Sender, "__init__", owned_wire)
    real = RegistryClient.put_blob
    lock = threading.Lock()
    now = {"calls": 0}
    most = {"calls": 0, "pieces": 0, "off_the_wire": 0}

    def watched(self, sha, pieces, size, *how):  # type: ignore[no-untyped-def]
        def body() -> Iterator[bytes]:
            for piece in pieces:
                with lock:
                    if sha in whole:
                        most["pieces"] += 1
                        most["off_the_wire"] += wires[-1].owner != threading.get_ident()
                yield piece

        with lock:
            now["calls"] += 1
            most["calls"] = max(most["calls"], now["calls"])
        try:
            return real(self, sha, body(), size, *how)
        finally:
            with lock:
                now["calls"] -= 1

    monkeypatch.setattr(RegistryClient, "put_blob", watched)
    files = {f"model/part-{i}.bin": randbytes(40 + i, 3 * MiB) for i in range(4)}
    whole = {sha256(data) for data in files.values()}  # carton.toml and the like go beside
    path = tmp_path / "parts.carton"
    write_big_carton(path, files)
    run = cli("push", str(path), "--url", live_server.url)
    assert run.code == 0, run.err
    assert run.client.count("POST", "/api/v1/chunks", "/chunks") == 0
    for data in files.values():
        assert run.client.count("PUT", f"/api/v1/blobs/{sha256(data)}") == 1
        assert httpx.get(f"{live_server.url}/blobs/{sha256(data)}").content == data
    assert len(wires) == 1
    assert most["calls"] == 2
    assert most["pieces"] >= 4 and most["off_the_wire"] == 0


def push_cut_off(cli, live_server, path: Path, files: dict[str, bytes]):
    """Push a carton of ``files`` whose uploads fail with "the network went away" (patched
    by the caller): the push says so, fails, and never commits the carton."""
    write_big_carton(path, files)
    run = cli("push", str(path), "--url", live_server.url)
    assert run.code == 1 and "the network went away" in run.err
    assert run.client.count("POST", "/api/v1/cartons") == 0
    return run


def test_a_failed_whole_upload_stops_the_push(cli, live_server, tmp_path, monkeypatch):
    one_file_a_request(monkeypatch)
    real = RegistryClient.put_blob
    calls = {"n": 0}
    lock = threading.Lock()

    def second_fails(self, sha, pieces, size, *how):  # type: ignore[no-untyped-def]
        with lock:
            calls["n"] += 1
            n = calls["n"]
        if n == 2:
            raise ClientError("the network went away")
        return real(self, sha, pieces, size, *how)

    monkeypatch.setattr(RegistryClient, "put_blob", second_fails)
    files = {f"model/part-{i}.bin": randbytes(50 + i, 2 * MiB) for i in range(6)}
    push_cut_off(cli, live_server, tmp_path / "fails.carton", files)
    assert calls["n"] <= 4  # the files after the failure are not sent


def test_the_first_fresh_file_is_on_the_wire_while_the_others_are_probed(
    cli, live_server, tmp_path, monkeypatch
):
    """The first file worth probing is probed alone: once the registry says it holds none
    of it, its whole upload starts, and the other files are probed meanwhile."""
    from registry.client import sender

    files = {f"model/part-{i}.bin": randbytes(70 + i, 3 * MiB) for i in range(3)}
    first = sha256(files["model/part-0.bin"])
    first_sent = threading.Event()
    probed_after_it: list[bool] = []
    real_probe, real_put = sender.probe_names, RegistryClient.put_blob

    def probe(params, source, size):  # type: ignore[no-untyped-def]
        names = real_probe(params, source, size)
        if bytes(source[:64]) != files["model/part-0.bin"][:64]:
            probed_after_it.append(first_sent.wait(10))
        return names

    def put(self, sha, pieces, size, *how):  # type: ignore[no-untyped-def]
        if sha == first:
            first_sent.set()
        return real_put(self, sha, pieces, size, *how)

    monkeypatch.setattr(sender, "probe_names", probe)
    monkeypatch.setattr(RegistryClient, "put_blob", put)
    path = tmp_path / "first.carton"
    write_big_carton(path, files)
    run = cli("push", str(path), "--url", live_server.url)
    assert run.code == 0, run.err
    assert probed_after_it == [True, True]
    assert run.client.count("POST", "/api/v1/chunks/missing") == 2  # the first, the rest
    assert run.client.count("POST", "/api/v1/chunks", "/chunks") == 0
    assert run.client.count("PUT", f"/api/v1/blobs/{first}") == 1
    assert run.client.count("POST", "/api/v1/blobs", "/blobs") == 1  # the two others
    for data in files.values():
        assert httpx.get(f"{live_server.url}/blobs/{sha256(data)}").content == data


def _whole_uploads(monkeypatch) -> list[tuple[str, list[str], int | None]]:
    """Each whole upload a push sends: ("PUT" or "POST", the sha256 of its files, its
    Content-Length or None)."""
    sent: list[tuple[str, list[str], int | None]] = []
    real_put, real_post = RegistryClient.put_blob, RegistryClient.put_blobs

    def put(self, sha, pieces, size, *how):  # type: ignore[no-untyped-def]
        sent.append(("PUT", [sha], size))
        return real_put(self, sha, pieces, size, *how)

    def post(self, pieces, size, *how):  # type: ignore[no-untyped-def]
        answers = real_post(self, pieces, size, *how)
        sent.append(("POST", [a["sha256"] for a in answers], size))
        return answers

    monkeypatch.setattr(RegistryClient, "put_blob", put)
    monkeypatch.setattr(RegistryClient, "put_blobs", post)
    return sent


def test_fresh_files_after_the_first_go_several_to_a_request(
    cli, live_server, tmp_path, monkeypatch
):
    """The first goes at once, cut as it is sent (nothing is on the wire before it to hide
    a cut); the others are cut first and go together, up to ``CUT_AHEAD_BYTES`` a
    request (docs/chunk-transfer.md, "Cut uploads of several files")."""
    from registry.client import sender

    monkeypatch.setattr(sender, "CUT_AHEAD_BYTES", 5 * MiB)
    sent = _whole_uploads(monkeypatch)
    files = {f"model/part-{i}.bin": randbytes(90 + i, 2 * MiB) for i in range(6)}
    path = tmp_path / "several.carton"
    write_big_carton(path, files)
    run = cli("push", str(path), "--url", live_server.url)
    assert run.code == 0, run.err
    shas = [sha256(files[f"model/part-{i}.bin"]) for i in range(6)]
    big = {(how, tuple(names)): size for how, names, size in sent if set(names) <= set(shas)}
    assert (
        big
        == {
            ("PUT", (shas[0],)): None,  # chunked: not cut before it went
            ("POST", tuple(shas[1:3])): big[("POST", tuple(shas[1:3]))],
            ("POST", tuple(shas[3:5])): big[("POST", tuple(shas[3:5]))],
            ("PUT", (shas[5],)): big[("PUT", (shas[5],))],
        }
    )
    assert all(size is not None for key, size in big.items() if key[1] != (shas[0],))
    assert run.client.count("POST", "/api/v1/chunks", "/chunks") == 0
    for data in files.values():
        assert httpx.get(f"{live_server.url}/blobs/{sha256(data)}").content == data
    assert "uploaded 8 blob(s), 12.0 MiB" in run.out  # and carton.toml, the tensor index


def test_a_failed_upload_of_several_files_stops_the_push(cli, live_server, tmp_path, monkeypatch):
    def fails(self, pieces, size, *how):  # type: ignore[no-untyped-def]
        raise ClientError("the network went away")

    monkeypatch.setattr(RegistryClient, "put_blobs", fails)
    files = {f"model/part-{i}.bin": randbytes(95 + i, 2 * MiB) for i in range(4)}
    push_cut_off(cli, live_server, tmp_path / "fails-several.carton", files)


def test_a_file_sent_with_others_that_is_not_what_its_manifest_says_is_refused_in_local_words(
    cli, live_server, tmp_path
):
    """The registry refuses the whole request (400); the CLI names the file that is wrong,
    and none of the request's files is stored."""
    files = {f"model/part-{i}.bin": randbytes(100 + i, 2 * MiB) for i in range(3)}
    other = randbytes(110, 2 * MiB)
    good = tmp_path / "good.carton"
    write_big_carton(good, files)
    stale = tmp_path / "stale-several.carton"
    with zipfile.ZipFile(good) as z:
        members = {n: z.read(n) for n in z.namelist()}
    members["model/part-2.bin"] = other
    with zipfile.ZipFile(stale, "w", zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    run = cli("push", str(stale), "--url", live_server.url)
    assert run.code == 1
    expected = sha256(files["model/part-2.bin"])
    said = f"{stale}: model/part-2.bin: content hashes to {sha256(other)}, but MANIFEST says "
    assert said in run.err
    assert expected in run.err
    for name in ("model/part-1.bin", "model/part-2.bin"):
        head = httpx.head(f"{live_server.url}/blobs/{sha256(files[name])}")
        assert head.status_code == 404


def test_a_failed_whole_upload_stops_the_small_files_after_it(
    cli, live_server, tmp_path, monkeypatch
):
    """Small files go after the whole uploads are queued, each only while none has failed."""
    big = randbytes(80, 3 * MiB)
    smalls = {f"model/small-{i}.txt": f"small {i}".encode() for i in range(4)}
    failed = threading.Event()
    small_puts: list[str] = []
    real = RegistryClient.put_blob

    def put(self, sha, pieces, size, *how):  # type: ignore[no-untyped-def]
        if sha == sha256(big):
            failed.set()
            raise ClientError("the network went away")
        small_puts.append(sha)
        assert failed.wait(10)  # the whole upload fails before this one is sent
        return real(self, sha, pieces, size, *how)

    monkeypatch.setattr(RegistryClient, "put_blob", put)
    path = tmp_path / "mixed.carton"
    write_big_carton(path, {"model/big.bin": big, **smalls})
    run = cli("push", str(path), "--url", live_server.url)
    assert run.code == 1 and "the network went away" in run.err
    # At most the one under way when the failure came (none if it came first); 4 unchecked.
    assert len(small_puts) <= 1, small_puts
    assert run.client.count("POST", "/api/v1/cartons") == 0


def _content_types(monkeypatch, lengths: dict[str, int | None] | None = None) -> dict[str, str]:
    """The ``Content-Type`` of each whole upload a push sends, by sha256 (and into
    ``lengths`` its ``Content-Length``, None when the body went chunked)."""
    real = RegistryClient.put_blob
    seen: dict[str, str] = {}

    def put(self, sha, pieces, size, progress=None, content_type="application/octet-stream"):  # type: ignore[no-untyped-def]
        seen[sha] = content_type
        if lengths is not None:
            lengths[sha] = size
        return real(self, sha, pieces, size, progress, content_type)

    monkeypatch.setattr(RegistryClient, "put_blob", put)
    return seen


def _plan_sizes(live_server, data: bytes) -> list[int]:
    plan = httpx.get(f"{live_server.url}/api/v1/blobs/{sha256(data)}/chunks").json()
    return [c["size"] for c in plan["chunks"]]


def test_a_fresh_stored_file_goes_whole_cut_here(cli, live_server, proxy, tmp_path, monkeypatch):
    """Cut by FastCDC on the client (docs/chunk-transfer.md, cut uploads): the registry
    stores the very chunks it would have cut, and a fine-tune pushed after it sends only
    its changed region."""
    seen = _content_types(monkeypatch)
    weights = randbytes(70, 24 * MiB)
    up, _ = push(cli, proxy, carton(tmp_path, "cut-here", weights))
    assert seen[sha256(weights)] == chunk_transfer.chunking(live_server.ctx)["cut_upload_type"]
    assert len(weights) <= up <= len(weights) + SLACK  # the records' lengths: 4 bytes a chunk
    params = live_server.ctx.chunk_params
    assert _plan_sizes(live_server, weights) == [len(c) for c in iter_chunks(params, [weights])]
    assert httpx.get(f"{live_server.url}/blobs/{sha256(weights)}").content == weights
    variant = with_region(weights, 71, 8 * MiB, MiB)
    up, _ = push(cli, proxy, carton(tmp_path, "cut-here-2", variant))
    assert up <= MiB + SLACK


def test_a_file_over_the_cut_ahead_size_is_cut_as_it_is_sent(
    cli, live_server, tmp_path, monkeypatch
):
    """Its first byte does not wait for a pass over all of it: the body goes chunked."""
    monkeypatch.setattr(cut_upload, "CUT_AHEAD_BYTES", MiB)
    one_file_a_request(monkeypatch)
    sizes: dict[str, int | None] = {}
    seen = _content_types(monkeypatch, sizes)
    small, large = randbytes(74, MiB), randbytes(75, 12 * MiB)
    path = tmp_path / "ahead.carton"
    # The large one first (MANIFEST's order): a push's first whole upload is not cut ahead.
    write_big_carton(path, {WEIGHTS: large, "model/z-small.bin": small})
    run = cli("push", str(path), "--url", live_server.url)
    assert run.code == 0, run.err
    cut_type = chunk_transfer.chunking(live_server.ctx)["cut_upload_type"]
    assert seen[sha256(large)] == seen[sha256(small)] == cut_type
    assert sizes[sha256(large)] is None
    assert sizes[sha256(small)] == len(small) + 4 * len(_plan_sizes(live_server, small))
    params = live_server.ctx.chunk_params
    assert _plan_sizes(live_server, large) == [len(c) for c in iter_chunks(params, [large])]
    assert httpx.get(f"{live_server.url}/blobs/{sha256(large)}").content == large


def test_files_go_as_they_are_to_a_registry_without_cut_uploads(
    cli, live_server, tmp_path, monkeypatch
):
    terms_without(monkeypatch, "cut_upload_type")
    seen = _content_types(monkeypatch)
    weights = randbytes(72, 6 * MiB)
    run = cli("push", str(carton(tmp_path, "plain", weights)), "--url", live_server.url)
    assert run.code == 0, run.err
    assert seen[sha256(weights)] == "application/octet-stream"
    params = live_server.ctx.chunk_params
    assert _plan_sizes(live_server, weights) == [len(c) for c in iter_chunks(params, [weights])]


def test_a_compressed_file_goes_as_it_is(cli, live_server, tmp_path, monkeypatch):
    """Cutting it here first would decompress it twice: the registry cuts it."""
    seen = _content_types(monkeypatch)
    weights = randbytes(73, 3 * MiB) * 2  # compressible
    path = tmp_path / "deflated.carton"
    write_big_carton(path, {WEIGHTS: weights})
    with zipfile.ZipFile(path) as z:
        members = {i.filename: z.read(i) for i in z.infolist()}
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            kind = zipfile.ZIP_DEFLATED if name == WEIGHTS else zipfile.ZIP_STORED
            z.writestr(name, data, compress_type=kind)
    run = cli("push", str(path), "--url", live_server.url)
    assert run.code == 0, run.err
    assert seen[sha256(weights)] == "application/octet-stream"
    assert httpx.get(f"{live_server.url}/blobs/{sha256(weights)}").content == weights
