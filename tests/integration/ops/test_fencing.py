"""A push that stalls past its lease while GC runs must not index what GC took (fencing)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select, update

from registry.db.tables import Carton, UploadLease
from registry.services.fsck import check_integrity
from registry.services.gc import collect_garbage
from registry.services.ingest import push as push_module
from tests.integration.ops.helpers import make_carton, push

pytestmark = pytest.mark.settings(lease_timeout=2.0)


def _stall_then(registry_ctx, monkeypatch, action) -> None:  # type: ignore[no-untyped-def]
    """Once the push's bytes are written, run ``action`` as if the server had frozen meanwhile."""
    real = push_module.resolve_missing

    def stalled(ctx, packs, missing, links, *rest):  # type: ignore[no-untyped-def]
        action(ctx, packs.lease.id)
        return real(ctx, packs, missing, links, *rest)

    monkeypatch.setattr(push_module, "resolve_missing", stalled)


def _backdate(ctx, lease_id: str) -> None:  # type: ignore[no-untyped-def]
    with ctx.transaction() as session:
        session.execute(
            update(UploadLease)
            .where(UploadLease.id == lease_id)
            .values(heartbeat_at=datetime.now(UTC) - timedelta(seconds=60))
        )


def test_a_push_that_outlived_its_lease_while_gc_ran_is_refused(
    ops_client, registry_ctx, monkeypatch
) -> None:
    ran = []

    def frozen_while_gc_runs(ctx, lease_id):  # type: ignore[no-untyped-def]
        _backdate(ctx, lease_id)
        ran.append(collect_garbage(ctx, grace_seconds=0))

    _stall_then(registry_ctx, monkeypatch, frozen_while_gc_runs)
    carton = make_carton({"model/small.json": b"{}", "model/weights.bin": os.urandom(300_000)})
    response = push(ops_client, carton)
    assert response.status_code == 503, response.text
    assert "REGISTRY_LEASE_TIMEOUT" in response.json()["error"]
    assert "retry-after" in response.headers
    assert ran and ran[0].leases_expired == 1
    with registry_ctx.sessions() as s:
        assert s.scalar(select(func.count()).select_from(Carton)) == 0
    assert check_integrity(registry_ctx).ok

    monkeypatch.undo()  # pushed again, it is stored and complete
    again = push(ops_client, carton)
    assert again.status_code == 201, again.text
    assert check_integrity(registry_ctx, verify_hashes=True).ok


def test_a_push_whose_lease_held_survives_gc(ops_client, registry_ctx, monkeypatch) -> None:
    def gc_meanwhile(ctx, lease_id):  # type: ignore[no-untyped-def]
        collect_garbage(ctx, grace_seconds=0)

    _stall_then(registry_ctx, monkeypatch, gc_meanwhile)
    carton = make_carton({"model/small.json": b"{}", "model/weights.bin": os.urandom(300_000)})
    response = push(ops_client, carton)
    assert response.status_code == 201, response.text
    assert check_integrity(registry_ctx, verify_hashes=True).ok
    sha = response.json()["manifest_sha256"]
    full = ops_client.get(f"/cartons/{sha}.carton", params={"form": "full"})
    assert full.status_code == 200
