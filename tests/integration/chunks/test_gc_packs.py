"""GC of packs on both backend pairs: dead packs go, mostly dead ones are rewritten,
leased ones stay, orphans go after ``lease_timeout``, and GC running in a loop during
concurrent pushes of overlapping variants loses nothing."""

from __future__ import annotations

import concurrent.futures
import random
import threading
import time

import pytest
from sqlalchemy import select

from registry.blobstore.base import new_pack_name
from registry.db.tables import Pack
from registry.services.chunkstore.reader import load_file
from registry.services.fsck import check_integrity
from registry.services.gc import GcBusy, collect_garbage
from registry.services.leases import Lease
from tests import finetune
from tests.helpers import carton_toml, referenced, sha, stored
from tests.integration.chunks.helpers import check_pulls, push, stats, weights_carton
from tests.rawstore import pack_layout_key, raw_get

MiB = 1024 * 1024
_rng = random.Random(21)
ONLY_V1 = _rng.randbytes(2 * MiB)
KEPT = _rng.randbytes(400_000)
ALONE = _rng.randbytes(MiB)


def packs_of(ctx, data: bytes) -> set[str]:
    with ctx.sessions() as s:
        stored_file = load_file(s, sha(data))
    assert stored_file is not None and stored_file.ranges is not None
    return {r.pack for r in stored_file.ranges}


def pack_rows(ctx) -> dict[str, bool]:
    """Every pack row: name -> retired."""
    with ctx.sessions() as s:
        return {n: r is not None for n, r in s.execute(select(Pack.name, Pack.retired_at))}


def in_store(ctx, pack: str) -> bool:
    return raw_get(ctx.blobs, pack_layout_key(pack)) is not None


@pytest.fixture
def dead_pack(client, registry_ctx) -> str:
    """The pack of a model's only version, deleted."""
    push(client, weights_carton(ALONE, "alone"))
    (pack,) = packs_of(registry_ctx, ALONE)
    assert client.delete("/api/v1/models/alone/versions/1").status_code == 200
    return pack


@pytest.fixture
def mostly_dead_pack(client, registry_ctx) -> str:
    """v1's pack, holding v1's own large file and a small one v2 keeps; v1 deleted."""
    push(client, weights_carton(ONLY_V1, "pair", kept=KEPT))
    push(client, weights_carton(KEPT, "pair"))
    (pack,) = packs_of(registry_ctx, ONLY_V1)
    assert packs_of(registry_ctx, KEPT) == {pack}
    assert client.delete("/api/v1/models/pair/versions/1").status_code == 200
    return pack


def test_a_dead_pack_is_deleted(client, registry_ctx, dead_pack):
    before = stats(client)["stored_bytes"]
    dry = collect_garbage(registry_ctx, grace_seconds=0, dry_run=True)
    assert dry.packs.packs_deleted == 1 and in_store(registry_ctx, dead_pack)

    report = collect_garbage(registry_ctx, grace_seconds=0)
    assert report.packs.packs_deleted == 1
    assert report.packs.pack_bytes_freed == len(ALONE)
    assert not in_store(registry_ctx, dead_pack) and dead_pack not in pack_rows(registry_ctx)
    freed = len(ALONE) + len(carton_toml("alone"))
    assert before - stats(client)["stored_bytes"] == report.bytes_freed == freed
    assert (dry.deleted, dry.bytes_freed) == (report.deleted, report.bytes_freed)
    assert check_integrity(registry_ctx, verify_hashes=True).ok


def test_a_mostly_dead_pack_is_rewritten_then_retired(client, registry_ctx, mostly_dead_pack):
    old = mostly_dead_pack
    before = stats(client)["stored_bytes"]
    dry = collect_garbage(registry_ctx, grace_seconds=0, dry_run=True)
    assert dry.packs.packs_rewritten == 1 and pack_rows(registry_ctx) == {old: False}

    first = collect_garbage(registry_ctx, grace_seconds=0)
    assert first.packs.packs_rewritten == 1 and first.packs.packs_deleted == 0
    (new,) = packs_of(registry_ctx, KEPT)
    assert new != old
    assert pack_rows(registry_ctx) == {old: True, new: False}
    assert in_store(registry_ctx, old)  # readers that loaded the old segments finish
    assert raw_get(registry_ctx.blobs, pack_layout_key(new)) == KEPT  # live chunks only
    check_pulls(client, push(client, weights_carton(KEPT, "pair"), 200)["manifest_sha256"], KEPT)

    second = collect_garbage(registry_ctx, grace_seconds=0)
    assert second.packs.pack_bytes_freed == len(ONLY_V1) + len(KEPT)
    assert pack_rows(registry_ctx) == {new: False} and not in_store(registry_ctx, old)
    assert before - stats(client)["stored_bytes"] == len(ONLY_V1)
    assert check_integrity(registry_ctx, verify_hashes=True).ok


def test_max_unused_is_how_many_dead_bytes_may_stay(client, registry_ctx, mostly_dead_pack):
    """The pack is 2 MiB dead beside 400 KB live: a share of the live bytes large enough
    (plus the 1 MiB slack) leaves it; the default (2%) rewrites it."""
    dead, live = len(ONLY_V1), len(KEPT)
    enough = (dead - MiB) / live + 0.01
    report = collect_garbage(registry_ctx, grace_seconds=0, max_unused=enough)
    assert report.packs.packs_rewritten == 0 and packs_of(registry_ctx, KEPT) == {mostly_dead_pack}
    short = (dead - MiB) / live - 0.01
    dry = collect_garbage(registry_ctx, grace_seconds=0, dry_run=True, max_unused=short)
    assert dry.packs.packs_rewritten == 1 and dry.packs.pack_bytes_freed == dead
    assert registry_ctx.settings.gc_max_unused == 0.02
    assert collect_garbage(registry_ctx, grace_seconds=0).packs.packs_rewritten == 1
    assert packs_of(registry_ctx, KEPT) != {mostly_dead_pack}
    with pytest.raises(ValueError, match="negative"):
        collect_garbage(registry_ctx, grace_seconds=0, max_unused=-0.1)


def test_a_leased_pack_is_never_deleted_or_rewritten(
    client, registry_ctx, dead_pack, mostly_dead_pack
):
    packs = {dead_pack, mostly_dead_pack}
    before = stats(client)["stored_bytes"]
    with Lease(registry_ctx.sessions, registry_ctx.settings.lease_timeout) as lease:
        with registry_ctx.transaction() as session:
            lease.add_packs(session, sorted(packs))
        for _ in range(2):
            report = collect_garbage(registry_ctx, grace_seconds=0)
            assert report.packs.packs_skipped_leased == 2
            assert report.packs.packs_deleted == report.packs.packs_rewritten == 0
            assert pack_rows(registry_ctx) == dict.fromkeys(packs, False)
            assert all(in_store(registry_ctx, p) for p in packs)
        assert before - stats(client)["stored_bytes"] == len(carton_toml("alone"))  # not packs
        lease.release()

    report = collect_garbage(registry_ctx, grace_seconds=0)
    assert (report.packs.packs_deleted, report.packs.packs_rewritten) == (1, 1)
    assert not in_store(registry_ctx, dead_pack)


@pytest.mark.settings(lease_timeout=2)
def test_orphan_packs_go_once_older_than_the_lease_timeout(client, registry_ctx):
    push(client, weights_carton(ALONE, "alone"))  # an indexed pack: never an orphan
    (indexed,) = packs_of(registry_ctx, ALONE)
    orphans = []
    for data in (b"a crashed push's pack", b"a pack a live push is writing"):
        writer = registry_ctx.blobs.new_pack(new_pack_name())
        writer.write(data)
        writer.commit()
        orphans.append(writer.name)
    crashed, in_flight = orphans
    with Lease(registry_ctx.sessions, registry_ctx.settings.lease_timeout) as lease:
        with registry_ctx.transaction() as session:
            lease.add_packs(session, [in_flight])
        young = collect_garbage(registry_ctx, grace_seconds=0)
        assert young.packs.orphan_packs_deleted == 0 and in_store(registry_ctx, crashed)
        time.sleep(registry_ctx.settings.lease_timeout + 1.2)
        report = collect_garbage(registry_ctx, grace_seconds=0)
        assert report.packs.orphan_packs_deleted == 1
        assert not in_store(registry_ctx, crashed)
        assert in_store(registry_ctx, in_flight) and in_store(registry_ctx, indexed)
        lease.release()  # the push failed: what it wrote is an orphan now
    assert collect_garbage(registry_ctx, grace_seconds=0).packs.orphan_packs_deleted == 1
    assert {p.name for p in registry_ctx.blobs.iter_packs()} == {indexed}


def test_gc_in_a_loop_during_pushes_of_overlapping_variants_loses_nothing(client, registry_ctx):
    base = finetune.base(finetune.MIN_DATA_SIZE, seed=3)
    family = [c.file.to_bytes() for c in finetune.family(finetune.MIN_DATA_SIZE, seed=3)]
    single = [c.file.to_bytes() for c in finetune.variants(finetune.MIN_DATA_SIZE, 3).values()]
    cartons = [weights_carton(d, "chain") for d in family[1:]]
    cartons += [weights_carton(d, f"variant-{i % 2}") for i, d in enumerate(single)]
    expected = {sha(d): d for d in family[1:] + single}
    # The base's pack, mostly dead once v1 goes (v2 keeps its first MiB): GC rewrites
    # or deletes it while the variants look for their chunks in it.
    push(client, weights_carton(base.to_bytes(), "seed"))
    push(client, weights_carton(base.to_bytes()[:MiB], "seed"))

    stop = threading.Event()
    runs: list[object] = []
    errors: list[BaseException] = []

    def gc_loop() -> None:
        while not stop.is_set():
            try:
                runs.append(collect_garbage(registry_ctx, grace_seconds=0))
            except GcBusy:
                pass
            except BaseException as exc:  # surfaced below
                errors.append(exc)
                return

    gc_thread = threading.Thread(target=gc_loop, daemon=True)
    gc_thread.start()
    try:
        assert client.delete("/api/v1/models/seed/versions/1").status_code == 200
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            first = list(pool.map(lambda c: client.post("/api/v1/cartons", content=c), cartons))
            again = list(pool.map(lambda c: client.post("/api/v1/cartons", content=c), cartons))
    finally:
        stop.set()
        gc_thread.join(timeout=120)
    assert not errors, errors
    assert len(runs) >= 2
    assert [r.status_code for r in first] == [201] * len(cartons), [r.text for r in first]
    assert [r.status_code for r in again] == [200] * len(cartons), [r.text for r in again]

    report = check_integrity(registry_ctx, verify_hashes=True)
    assert report.ok, report
    for response in first:
        body = response.json()
        files = client.get(f"/api/v1/cartons/{body['manifest_sha256']}").json()["files"]
        (weights,) = [f["sha256"] for f in files if f["path"].endswith(".safetensors")]
        check_pulls(client, body["manifest_sha256"], expected[weights], ranges=2)
    collect_garbage(registry_ctx, grace_seconds=0)
    collect_garbage(registry_ctx, grace_seconds=0)
    assert stored(registry_ctx) == referenced(registry_ctx)
    assert check_integrity(registry_ctx, verify_hashes=True).ok


def test_a_pack_with_damaged_live_chunks_is_not_rewritten_until_healed(
    client, registry_ctx, mostly_dead_pack
):
    """A rewrite would carry the bad bytes away from their record (chunkstore.damage)."""
    from registry.services.chunkstore.damage import CORRUPT, record_damage

    old = mostly_dead_pack
    assert record_damage(
        registry_ctx, old, [len(pack_table(registry_ctx, old)) - 1], CORRUPT, "fsck"
    )
    report = collect_garbage(registry_ctx, grace_seconds=0)
    assert report.packs.packs_rewritten == 0 and pack_rows(registry_ctx) == {old: False}

    push(client, weights_carton(KEPT, "pair", again=b"heals"))  # KEPT's bytes, sent again
    healed = collect_garbage(registry_ctx, grace_seconds=0)
    assert healed.packs.packs_deleted + healed.packs.packs_rewritten == 1
    assert check_integrity(registry_ctx, verify_hashes=True).ok


def pack_table(ctx, name: str) -> list[tuple[str, int]]:
    from registry.services.chunkstore.layout import parse_pack_table

    with ctx.sessions() as s:
        return parse_pack_table(s.scalar(select(Pack.chunk_table).where(Pack.name == name)))
