"""The CLI within the registry's chunk limits (issue 24), on both backend pairs: records per
upload, its share of the ingest slots, and files the registry will not assemble."""

from __future__ import annotations

import threading
from functools import wraps

import httpx
import pytest

from registry.client import RegistryClient
from registry.client import chunks as client_chunks
from registry.services import chunk_transfer
from tests.integration.cli.test_chunk_transfer import MiB, carton, randbytes, sha256
from tests.integration.cli.test_push_variant import write_big_carton


class InFlight:
    """Wraps service calls to record how many run at once, and what they answered."""

    def __init__(self) -> None:
        self.now = self.most = 0
        self.answers: list[dict | list[dict]] = []
        self._lock = threading.Lock()

    def wrap(self, monkeypatch, module, name: str) -> None:
        real = getattr(module, name)

        @wraps(real)
        def counted(*args, **kwargs):
            with self._lock:
                self.now += 1
                self.most = max(self.most, self.now)
            try:
                answer = real(*args, **kwargs)
                self.answers.append(answer)
                return answer
            finally:
                with self._lock:
                    self.now -= 1

        monkeypatch.setattr(module, name, counted)


def test_uploads_hold_at_most_the_records_the_registry_announces(
    cli, live_server, tmp_path, monkeypatch, as_chunks
):
    """A registry that takes 2 records an upload: a 1 MiB file still goes as chunks, in
    requests it takes."""
    monkeypatch.setattr(chunk_transfer, "max_batch_records", lambda ctx: 2)
    calls = InFlight()
    calls.wrap(monkeypatch, chunk_transfer, "store_chunks")
    weights = randbytes(41, MiB)
    run = cli("push", str(carton(tmp_path, "records", weights)), "--url", live_server.url)
    assert run.code == 0, run.err
    assert run.client.count("PUT", f"/api/v1/blobs/{sha256(weights)}") == 0
    assert len(calls.answers) > 4
    assert max(a["chunks"] for a in calls.answers) == 2
    assert httpx.get(f"{live_server.url}/blobs/{sha256(weights)}").content == weights


@pytest.mark.settings(max_concurrent_pushes_per_client=1, ingest_queue_timeout=1.0)
def test_a_push_keeps_to_its_share_of_the_ingest_slots(
    cli, live_server, tmp_path, monkeypatch, as_chunks
):
    """One slot per client: the CLI learns it from /api/v1/chunking and never has two
    uploads in flight (the second would wait, then 503), small files whole included."""
    monkeypatch.setattr(client_chunks, "BATCH_BYTES", 256 * 1024)  # many upload requests
    calls = InFlight()  # counted where the CLI sends them: the registry would queue them
    for name in ("post_chunks", "assemble_blob", "put_blob"):
        calls.wrap(monkeypatch, RegistryClient, name)
    files = {f"model/small-{i}.bin": randbytes(50 + i, 1000) for i in range(6)}
    big = [randbytes(60 + i, 2 * MiB) for i in range(3)]
    path = tmp_path / "share.carton"
    write_big_carton(path, {**files, **{f"model/big-{i}.bin": b for i, b in enumerate(big)}})
    run = cli("push", str(path), "--url", live_server.url)
    assert run.code == 0, run.err
    assert run.client.count("POST", "/api/v1/chunks") > 6
    assert calls.most == 1


@pytest.mark.settings(max_assemble_ratio=4, assemble_ratio_min_bytes=MiB)
def test_a_file_of_zeros_the_registry_will_not_assemble_is_sent_whole(
    cli, live_server, tmp_path, as_chunks
):
    """8 MiB of zeros is one 256 KiB chunk 32 times: past the ratio (4 here), so the
    assembly answers 413 before hashing, and the CLI sends the file whole instead."""
    zeros = bytes(8 * MiB)
    run = cli("push", str(carton(tmp_path, "zeros", zeros)), "--url", live_server.url)
    assert run.code == 0, run.err
    assert run.client.count("POST", f"/api/v1/blobs/{sha256(zeros)}/assemble") == 1
    assert run.client.count("PUT", f"/api/v1/blobs/{sha256(zeros)}") == 1
    assert httpx.get(f"{live_server.url}/blobs/{sha256(zeros)}").content == zeros


def test_when_the_registrys_chunks_do_not_make_a_sound_file_it_is_sent_whole(
    cli, live_server, tmp_path, monkeypatch
):
    """The registry answers a mismatch with no more than that; the CLI hashes its file:
    right (the registry's chunks are at fault, say a damaged pack), it sends the file
    whole; the stale-file case keeps a local check's words (test_chunk_transfer)."""
    from registry.errors import ReassemblyMismatch

    def damaged(ctx, sha, size, chunks):  # type: ignore[no-untyped-def]
        raise ReassemblyMismatch(f"the chunks named do not reassemble to sha256 {sha}")

    monkeypatch.setattr(chunk_transfer, "assemble_blob", damaged)
    weights = randbytes(71, 2 * MiB)
    run = cli("push", str(carton(tmp_path, "damaged", weights)), "--url", live_server.url)
    assert run.code == 0, run.err
    assert run.client.count("PUT", f"/api/v1/blobs/{sha256(weights)}") == 1
    assert httpx.get(f"{live_server.url}/blobs/{sha256(weights)}").content == weights


@pytest.mark.settings(max_concurrent_pushes_per_client=1, ingest_queue_timeout=1.0)
def test_whole_uploads_keep_to_the_share_of_the_ingest_slots(
    cli, live_server, tmp_path, monkeypatch
):
    """Fresh large files go whole, two requests at once where the share allows: here one
    (the first alone, the two others in one request, carton.toml, the tensor index)."""
    calls = InFlight()
    calls.wrap(monkeypatch, RegistryClient, "put_blob")
    calls.wrap(monkeypatch, RegistryClient, "put_blobs")
    big = {f"model/big-{i}.bin": randbytes(70 + i, 2 * MiB) for i in range(3)}
    path = tmp_path / "share-whole.carton"
    write_big_carton(path, big)
    run = cli("push", str(path), "--url", live_server.url)
    assert run.code == 0, run.err
    assert len(calls.answers) == 4
    assert [len(a) for a in calls.answers if isinstance(a, list)] == [2]
    assert calls.most == 1
