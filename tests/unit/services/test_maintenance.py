"""GC and fsck on a memory store: what is collected, what is kept, what is reported."""

from __future__ import annotations

import io

import pytest

from registry.errors import GcBusy
from registry.services import deletes, models
from registry.services.blobs import put_blob
from registry.services.fsck import check_integrity
from registry.services.gc import collect_garbage, gc_lock
from registry.services.leases import Lease
from tests.helpers import carton_toml, make_carton, referenced, sha, stored
from tests.rawstore import layout_key, raw_set


def test_gc_collects_only_unreferenced_blobs_past_the_grace_period(ctx, push) -> None:
    push(make_carton({"w/keep": b"kept"}, model_name="keep"))
    push(make_carton({"w/drop": b"dropped"}, model_name="drop"))
    deletes.delete_model(ctx, "drop")

    gone = {sha(b"dropped"): len(b"dropped"), sha(carton_toml("drop")): len(carton_toml("drop"))}

    assert collect_garbage(ctx, grace_seconds=3600).blobs_deleted == 0  # too young
    dry = collect_garbage(ctx, grace_seconds=0, dry_run=True)
    assert set(dry.deleted) == set(gone) and set(gone) <= stored(ctx)

    report = collect_garbage(ctx, grace_seconds=0)
    assert set(report.deleted) == set(gone)
    assert report.bytes_freed == sum(gone.values())
    assert stored(ctx) == referenced(ctx)


def test_gc_keeps_blobs_a_live_lease_names(ctx) -> None:
    put_blob(ctx, sha(b"leased"), io.BytesIO(b"leased"))
    with Lease(ctx.sessions, ctx.settings.lease_timeout) as lease:
        with ctx.transaction() as session:
            lease.add(session, [sha(b"leased")])
        report = collect_garbage(ctx, grace_seconds=0)
        assert report.skipped_leased == 1 and report.blobs_deleted == 0
        lease.release()
    assert collect_garbage(ctx, grace_seconds=0).deleted == [sha(b"leased")]


def test_one_gc_at_a_time_and_observers_hear_every_outcome(ctx) -> None:
    heard: list[tuple[object, str]] = []
    ctx.observers.gc.append(lambda report, outcome: heard.append((report, outcome)))
    with gc_lock(ctx), pytest.raises(GcBusy, match="another GC is running"):
        collect_garbage(ctx, grace_seconds=0)
    report = collect_garbage(ctx, grace_seconds=0, dry_run=True)
    assert heard == [(None, "busy"), (report, "dry_run")]


def test_fsck_finds_lost_and_corrupt_blobs_and_marks_their_versions(ctx, push) -> None:
    push(make_carton({"w/lost": b"will be lost", "w/fine": b"fine"}, model_name="m"))
    push(make_carton({"w/bad": b"will rot"}, model_name="n"))
    assert check_integrity(ctx, verify_hashes=True).ok

    ctx.blobs.delete(sha(b"will be lost"))  # behind the index's back
    raw_set(ctx.blobs, layout_key(sha(b"will rot")), b"rotten")
    orphan = b"pushed, never referenced"
    put_blob(ctx, sha(orphan), io.BytesIO(orphan))

    heard = []
    ctx.observers.fsck.append(heard.append)
    report = check_integrity(ctx, verify_hashes=True)
    assert heard == [report] and not report.ok
    assert report.missing == [sha(b"will be lost")]
    assert report.wrong_size == [sha(b"will rot")]
    assert report.orphans == [sha(orphan)]
    assert {v["version"] for v in report.versions_marked} == {1}
    for name in ("m", "n"):
        [version] = models.get_model(ctx, name)["versions"]
        assert version["state"] == "UNAVAILABLE"
        assert version["reason"].startswith("fsck: blob ")


def test_fsck_hashes_same_size_corruption(ctx, push) -> None:
    push(make_carton({"w/data": b"original"}, model_name="m"))
    raw_set(ctx.blobs, layout_key(sha(b"original")), b"ORIGINAL")
    assert check_integrity(ctx).ok  # sizes agree: only hashing finds it
    report = check_integrity(ctx, verify_hashes=True, mark=False)
    assert report.corrupt == [sha(b"original")]
    assert report.affected_cartons and report.versions_marked == []
    assert models.get_model(ctx, "m")["versions"][0]["state"] == "READY"
