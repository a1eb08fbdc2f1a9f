"""Pushing a variant of a big carton transfers about the changed file only."""

from __future__ import annotations

import hashlib
import random
import zipfile
from pathlib import Path

import pytest

from tests.integration.cli.conftest import CARTON_TOML

MiB = 1 << 20


def _data(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


def write_big_carton(path: Path, files: dict[str, bytes]) -> str:
    """A Stored carton (stdlib zipfile) with a correct MANIFEST; returns the manifest hash."""
    members = {
        "carton.toml": CARTON_TOML.format(name="big-model").encode(),
        "tensor_data/index.toml": b"tensor = []\n",
        **files,
    }
    manifest = "".join(
        f"{p}={hashlib.sha256(members[p]).hexdigest()}\n"
        for p in sorted(members, key=lambda p: p.encode())
    ).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("MANIFEST", manifest)
        for name, data in members.items():
            z.writestr(name, data)
    return hashlib.sha256(manifest).hexdigest()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite-fs"], indirect=True)
def test_variant_push_sends_only_the_changed_file(cli, live_server, tmp_path):
    files = {f"model/shard-{i:02d}.bin": _data(i, 10 * MiB) for i in range(20)}
    files["model/head.bin"] = _data(100, MiB)
    first = tmp_path / "v1.carton"
    first_sha = write_big_carton(first, files)
    run = cli("push", str(first), "--url", live_server.url)
    assert run.code == 0, run.err
    assert run.last_line == first_sha
    assert run.client.bytes_sent > 200 * MiB

    files["model/head.bin"] = _data(101, MiB)
    second = tmp_path / "v2.carton"
    second_sha = write_big_carton(second, files)
    del files
    run = cli("push", str(second), "--url", live_server.url)
    assert run.code == 0, run.err
    assert run.last_line == second_sha
    client = run.client
    assert client.bytes_sent < 5 * MiB, client.bytes_sent
    # head.bin is over min_file_bytes, but the registry holds none of its chunks (the
    # probe): sent whole, and cut there.
    assert client.count("PUT") == 1
    assert client.count("POST", "/api/v1/blobs/", "/assemble") == 0
    assert "version 2" in run.out
