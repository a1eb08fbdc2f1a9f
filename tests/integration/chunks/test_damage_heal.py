"""One damaged byte never spreads (issue 23), on both backend pairs, through a live server.

A flipped byte in a pack, or a deleted pack; then fsck; then a REST push of a
variant, a CLI push of another variant, and a re-push of the original. At every
step nothing is served wrong (a read of damaged bytes is refused, or cut short
before them), every push pulls back exact, and at the end fsck is clean and the
model loads.
"""

from __future__ import annotations

import io
import random
import zipfile
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from registry.db.tables import DamagedChunk
from registry.services.chunkstore.reader import load_file
from registry.services.fsck import check_integrity
from tests.helpers import sha
from tests.integration.chunks.test_fsck_packs import chunk_at
from tests.integration.cli.test_push_variant import write_big_carton
from tests.rawstore import pack_layout_key, raw_delete, raw_get, raw_set

MiB = 1024 * 1024
_rng = random.Random(23)
BASE = _rng.randbytes(3 * MiB)
ROT_AT = MiB  # in the bytes every variant shares with the base
REST_VARIANT = BASE[: 2 * MiB + MiB // 2] + _rng.randbytes(100_000) + BASE[2 * MiB + MiB // 2 :]
CLI_VARIANT = BASE[: MiB // 5] + _rng.randbytes(80_000) + BASE[MiB // 5 + 80_000 :]
WEIGHTS = "model/weights.bin"
MODEL = "big-model"  # write_big_carton's


def carton(tmp_path: Path, name: str, weights: bytes) -> tuple[Path, str]:
    path = tmp_path / f"{name}.carton"
    manifest = write_big_carton(path, {WEIGHTS: weights, "model/extra.txt": name.encode()})
    return path, manifest


def rest_push(server, path: Path) -> dict:
    response = httpx.post(f"{server.url}/api/v1/cartons", content=path.read_bytes(), timeout=60)
    assert response.status_code in (200, 201), response.text
    return response.json()


def served(server, sha256: str, data: bytes, headers: dict[str, str] | None = None) -> str:
    """GET the blob: "exact" when all of ``data`` (or the range) came, "refused: ..." when
    the registry said 503 or cut the body short. Wrong bytes fail the test."""
    try:
        response = httpx.get(f"{server.url}/blobs/{sha256}", headers=headers or {}, timeout=60)
    except httpx.RemoteProtocolError:  # the body ended before its Content-Length
        return "refused: cut short"
    if response.status_code == 503:
        return "refused: 503"
    if headers and "range" in headers:
        assert response.status_code == 206, response.text[:300]
        lo, hi = (int(x) for x in headers["range"].removeprefix("bytes=").split("-"))
        assert response.content == data[lo : hi + 1]
        return "exact"
    assert response.status_code == 200, response.text[:300]
    assert response.content == data, "wrong bytes served as a complete 200"
    return "exact"


def pulls_exact(server, manifest: str, weights: bytes) -> None:
    """The weights by /blobs (whole and a range across the rot), and the full carton."""
    assert served(server, sha(weights), weights) == "exact"
    span = {"range": f"bytes={ROT_AT - 5000}-{ROT_AT + 5000}"}
    assert served(server, sha(weights), weights, span) == "exact"
    full = httpx.get(f"{server.url}/cartons/{manifest}.carton", params={"form": "full"}, timeout=60)
    assert full.status_code == 200
    # Read in memory: a fixed /tmp name is shared by every test run on the machine.
    with zipfile.ZipFile(io.BytesIO(full.content)) as z:
        assert z.read(WEIGHTS) == weights


def damage_records(ctx) -> int:
    with ctx.sessions() as s:
        return int(s.scalar(select(func.count()).select_from(DamagedChunk)) or 0)


def weights_pack(ctx) -> str:
    with ctx.sessions() as s:
        stored = load_file(s, sha(BASE))
    assert stored is not None and stored.ranges is not None
    return stored.ranges[0].pack


@pytest.mark.parametrize("damage", ["flipped byte", "deleted pack"])
def test_damage_is_refused_recorded_and_healed_by_pushes(
    damage, live_server, cli, tmp_path
) -> None:
    ctx = live_server.ctx
    original, original_manifest = carton(tmp_path, "original", BASE)
    rest_push(live_server, original)
    pulls_exact(live_server, original_manifest, BASE)
    pack = weights_pack(ctx)
    _, digest = chunk_at(ctx, pack, ROT_AT)

    if damage == "flipped byte":
        rotten = bytearray(raw_get(ctx.blobs, pack_layout_key(pack)) or b"")
        rotten[ROT_AT] ^= 0x01
        raw_set(ctx.blobs, pack_layout_key(pack), bytes(rotten))
        # Before anyone looked: the read itself refuses the chunk (a MiB in: the response
        # had started, so it is cut short) and records it.
        assert served(live_server, sha(BASE), BASE) == "refused: cut short"
        assert damage_records(ctx) == 1
        metrics = httpx.get(f"{live_server.url}/metrics").text
        assert 'registry_damaged_chunks_total{found_by="read",reason="corrupt"}' in metrics
    else:
        raw_delete(ctx.blobs, pack_layout_key(pack))
        assert served(live_server, sha(BASE), BASE) == "refused: 503"

    report = check_integrity(ctx, verify_hashes=True)
    assert not report.ok and sha(BASE) in report.corrupt + report.missing
    assert damage_records(ctx) >= 1
    span = {"range": f"bytes={ROT_AT - 10}-{ROT_AT + 10}"}
    assert served(live_server, sha(BASE), BASE, span) == "refused: 503"  # known damaged now
    load = httpx.post(f"{live_server.url}/v2/repository/models/{MODEL}/load", json={})
    assert load.status_code >= 400

    # Negotiation asks for the damaged bytes again.
    missing = httpx.post(
        f"{live_server.url}/api/v1/blobs/missing", json={"sha256": [sha(BASE)]}
    ).json()
    assert missing["missing"] == [sha(BASE)]
    missing = httpx.post(f"{live_server.url}/api/v1/chunks/missing", json={"chunks": [digest]})
    assert missing.json()["missing"] == [digest]

    # A REST push of a variant stores its own good copy of the shared bytes.
    rest, rest_manifest = carton(tmp_path, "rest", REST_VARIANT)
    rest_push(live_server, rest)
    pulls_exact(live_server, rest_manifest, REST_VARIANT)
    if damage == "flipped byte":  # the only damaged chunk was shared: the base is healed
        pulls_exact(live_server, original_manifest, BASE)
    else:
        assert served(live_server, sha(BASE), BASE) in ("exact", "refused: 503")

    # A CLI push of another variant.
    cli_carton, cli_manifest = carton(tmp_path, "cli", CLI_VARIANT)
    run = cli("push", str(cli_carton), "--url", live_server.url)
    assert run.code == 0, run.err
    pulls_exact(live_server, cli_manifest, CLI_VARIANT)

    # The original, pushed again, heals whatever was left.
    rest_push(live_server, original)
    for manifest, weights in (
        (original_manifest, BASE),
        (rest_manifest, REST_VARIANT),
        (cli_manifest, CLI_VARIANT),
    ):
        pulls_exact(live_server, manifest, weights)
    assert damage_records(ctx) == 0 or damage == "deleted pack"
    clean = check_integrity(ctx, verify_hashes=True)
    assert clean.ok, clean.as_json()
    assert clean.corrupt_chunks == [] and clean.packs_missing == []
    load = httpx.post(f"{live_server.url}/v2/repository/models/{MODEL}/load", json={})
    assert load.status_code == 200, load.text


def test_a_healing_re_push_reports_healed_bytes_not_new_ones(live_server, tmp_path) -> None:
    """The report of a re-push that heals: the manifest is known (200, ``bytes_new`` 0,
    ``bytes_stored`` 0, as DESIGN.md's push response says), and what was written again in
    place of the damaged chunk is ``bytes_healed``."""
    ctx = live_server.ctx
    original, manifest = carton(tmp_path, "original", BASE)
    first = rest_push(live_server, original)
    assert first["bytes_healed"] == 0 and first["bytes_new"] >= len(BASE)
    pack = weights_pack(ctx)
    rotten = bytearray(raw_get(ctx.blobs, pack_layout_key(pack)) or b"")
    rotten[ROT_AT] ^= 0x01
    raw_set(ctx.blobs, pack_layout_key(pack), bytes(rotten))
    assert not check_integrity(ctx, verify_hashes=True).ok

    response = httpx.post(
        f"{live_server.url}/api/v1/cartons", content=original.read_bytes(), timeout=60
    )
    assert response.status_code == 200, response.text
    again = response.json()
    assert again["manifest_sha256"] == manifest
    assert again["bytes_new"] == 0 and again["bytes_deduplicated"] == again["bytes_total"]
    assert again["bytes_stored"] == 0
    # The damaged chunk, written again (a chunk is at most 256 KiB), and nothing else.
    assert 0 < again["bytes_healed"] <= 256 * 1024
    pulls_exact(live_server, manifest, BASE)
    assert damage_records(ctx) == 0
    assert check_integrity(ctx, verify_hashes=True).ok

    unchanged = rest_push(live_server, original)
    assert unchanged["bytes_healed"] == 0 and unchanged["bytes_new"] == 0


def test_a_cli_re_push_sends_only_the_damaged_chunk_and_heals_it(
    live_server, cli, tmp_path
) -> None:
    """The CLI hears "missing" for the damaged chunk, uploads that chunk alone, and the
    upload heals every file over the damaged copy: the slim push then goes through (no
    fallback to the whole carton) and the summary says what was healed."""
    ctx = live_server.ctx
    original, manifest = carton(tmp_path, "original", BASE)
    rest_push(live_server, original)
    pack = weights_pack(ctx)
    rotten = bytearray(raw_get(ctx.blobs, pack_layout_key(pack)) or b"")
    rotten[ROT_AT] ^= 0x01
    raw_set(ctx.blobs, pack_layout_key(pack), bytes(rotten))
    assert not check_integrity(ctx, verify_hashes=True).ok

    run = cli("push", str(original), "--url", live_server.url, "--no-cache")
    assert run.code == 0, run.err
    assert "note:" not in run.err and "sent the whole file" not in run.out
    assert "(nothing new)" in run.out and "0 B stored after chunk dedup" in run.out
    assert "healed: " in run.out
    sent = next(line for line in run.out.splitlines() if line.startswith("sent "))
    assert sent.startswith("sent ") and "KiB of 3.0 MiB" in sent  # one chunk, not the file
    pulls_exact(live_server, manifest, BASE)
    assert damage_records(ctx) == 0
    assert check_integrity(ctx, verify_hashes=True).ok
