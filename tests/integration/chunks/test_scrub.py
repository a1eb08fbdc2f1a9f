"""The scrub (issue 23): bit rot and a lost pack found at a bounded rate, before a user reads
them, recorded like a failed read; both backend pairs."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import select

from registry.db.tables import DamagedChunk
from registry.services.scrub import Scrubber, scrub_pass
from registry.settings import Settings
from tests.helpers import sha
from tests.integration.chunks.helpers import push, weights_carton
from tests.integration.chunks.test_fsck_packs import BASE, ROT_AT, base_pack, chunk_at
from tests.rawstore import pack_layout_key, raw_delete, raw_get, raw_set

FAST = 1 << 40  # bytes per second: no pause in a test


def records(ctx) -> list[tuple[int, str, str]]:
    with ctx.sessions() as s:
        return [
            (r.idx, r.reason, r.found_by)
            for r in s.scalars(select(DamagedChunk).order_by(DamagedChunk.idx))
        ]


def test_a_scrub_finds_a_flipped_byte_and_goes_on(client, registry_ctx):
    push(client, weights_carton(BASE, "alpha"))
    push(client, weights_carton(BASE[::-1], "beta"))
    assert scrub_pass(registry_ctx, FAST).damaged == 0
    pack = base_pack(registry_ctx)
    idx, _ = chunk_at(registry_ctx, pack, ROT_AT)
    rotten = bytearray(raw_get(registry_ctx.blobs, pack_layout_key(pack)) or b"")
    rotten[ROT_AT] ^= 0x01
    rotten[-1] ^= 0x01  # the pack's last chunk too: the pass goes on after the first
    raw_set(registry_ctx.blobs, pack_layout_key(pack), bytes(rotten))

    report = scrub_pass(registry_ctx, FAST)
    assert report.damaged == 2 and report.packs == 2
    found = records(registry_ctx)
    assert found[0] == (idx, "corrupt", "scrub") and len(found) == 2
    # What the scrub found, negotiation asks for again.
    missing = client.post("/api/v1/blobs/missing", json={"sha256": [sha(BASE)]}).json()
    assert missing["missing"] == [sha(BASE)]


def test_a_scrub_records_a_lost_pack(client, registry_ctx):
    push(client, weights_carton(BASE, "alpha"))
    pack = base_pack(registry_ctx)
    raw_delete(registry_ctx.blobs, pack_layout_key(pack))
    report = scrub_pass(registry_ctx, FAST)
    assert report.damaged == 1
    assert {reason for _, reason, _ in records(registry_ctx)} == {"missing"}


def test_a_scrub_keeps_to_its_rate(client, registry_ctx):
    push(client, weights_carton(BASE, "alpha"))
    now = [0.0]  # a clock that moves only while the scrub waits
    waited: list[float] = []

    def wait(seconds: float) -> bool:
        waited.append(seconds)
        now[0] += seconds
        return False

    stop = threading.Event()
    stop.wait = wait  # type: ignore[method-assign]
    report = scrub_pass(registry_ctx, len(BASE) // 2, stop=stop, clock=lambda: now[0])
    # 3 MiB at 1.5 MiB/s: two seconds of pauses, spread over the pass.
    assert report.bytes == len(BASE)
    assert sum(waited) == pytest.approx(2.0) and len(waited) >= 3


def test_the_scrubber_thread_runs_passes_until_closed(registry_ctx):
    scrubber = Scrubber(registry_ctx, FAST, pause=0.01)
    scrubber.start()
    try:
        for _ in range(500):
            if scrubber.passes:
                break
            threading.Event().wait(0.01)
    finally:
        scrubber.close()
    assert scrubber.passes >= 1


def test_the_scrub_rate_is_off_by_default_and_never_negative():
    assert Settings().scrub_rate == 0
    assert Settings.from_env({"REGISTRY_SCRUB_RATE": "1048576"}).scrub_rate == 1 << 20
    with pytest.raises(ValueError, match="REGISTRY_SCRUB_RATE"):
        Settings(scrub_rate=-1)
    with pytest.raises(ValueError, match="rate above 0"):
        scrub_pass(None, 0)  # type: ignore[arg-type]
