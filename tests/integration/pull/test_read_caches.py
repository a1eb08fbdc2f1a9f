"""The read path's facts in memory: answered without the database, never after a removal.

Two ``RegistryContext`` on one database and store stand for two server processes
(each has its own caches, connection pool and clock of trust): what one removes,
the other stops serving at once. ``tests/integration/ops/test_workers.py`` does
the same with real worker processes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from litestar.testing import TestClient

from registry.app import create_app
from registry.services.auth import create_token, revoke_token
from registry.services.chunkstore.reader import load_files
from registry.services.context import RegistryContext
from registry.services.fsck import check_integrity
from registry.services.gc import collect_garbage
from tests.integration.ops.helpers import corrupt
from tests.integration.pull.helpers import make_carton, push, sha256

BIG = b"linked weights " * 8000  # over the slim inline threshold: a LINKS target
SMALL = b"inlined config bytes\n" * 20  # inlined in the slim carton


@pytest.fixture
def other_ctx(registry_ctx: RegistryContext) -> Iterator[RegistryContext]:
    """Another "process": same settings, its own caches and connections."""
    ctx = RegistryContext.open(registry_ctx.settings)
    try:
        yield ctx
    finally:
        ctx.close()


@pytest.fixture
def other(other_ctx: RegistryContext) -> Iterator[TestClient]:
    with TestClient(create_app(ctx=other_ctx), base_url=other_ctx.settings.public_url) as c:
        yield c


def _pushed(client) -> tuple[str, str]:
    pushed = push(client, make_carton({"w/big.bin": BIG, "w/small.txt": SMALL}, model_name="m"))
    return pushed["manifest_sha256"], f"/cartons/{pushed['manifest_sha256']}.carton"


def _warm(client, carton_url: str) -> bytes:
    slim = client.get(carton_url)
    assert slim.status_code == 200
    assert client.head(carton_url).status_code == 200
    assert client.head(f"/blobs/{sha256(BIG)}").status_code == 200
    assert client.get(f"/blobs/{sha256(BIG)}").content == BIG
    return slim.content


def test_known_answers_need_no_database(client, other, other_ctx, monkeypatch):
    _manifest, carton_url = _pushed(client)
    slim = _warm(other, carton_url)

    def no_session():
        raise AssertionError("the hot path opened a database session")

    monkeypatch.setattr(other_ctx, "sessions", no_session)
    generation_reads = []
    real_connect = other_ctx.engine.connect
    monkeypatch.setattr(
        other_ctx.engine, "connect", lambda: generation_reads.append(1) or real_connect()
    )
    started = time.monotonic()
    for _ in range(20):
        assert other.head(carton_url).status_code == 200
        assert other.get(carton_url).content == slim
        head = other.head(f"/blobs/{sha256(BIG)}")
        assert head.status_code == 200 and int(head.headers["content-length"]) == len(BIG)
        assert other.get(f"/blobs/{sha256(BIG)}").content == BIG
    # The shared generation is read at most once per trust period, and by nothing else.
    periods = (time.monotonic() - started) / other_ctx.caches.facts.trust_seconds
    assert len(generation_reads) <= periods + 1


def test_a_delete_in_one_process_404s_in_another_at_once(client, other, other_ctx):
    manifest, carton_url = _pushed(client)
    _warm(other, carton_url)
    assert other.get(f"{carton_url}?form=full").status_code == 200
    deleted = client.delete("/api/v1/models/m/versions/1")
    assert deleted.status_code == 200 and deleted.json()["carton_deleted"]
    # No sleep: the delete returned only once no process trusts what it read before.
    assert other.head(carton_url).status_code == 404
    assert other.get(carton_url).status_code == 404
    assert other.get(f"{carton_url}?form=full").status_code == 404
    assert other.get(f"/cartons/{manifest}").status_code == 404  # the page, not cached
    # Its blobs stay until GC (DESIGN "Deleting"); after it, they 404 everywhere too.
    assert other.head(f"/blobs/{sha256(BIG)}").status_code == 200
    report = collect_garbage(client.app.state.ctx, grace_seconds=0)
    assert sha256(BIG) in report.deleted
    assert other.head(f"/blobs/{sha256(BIG)}").status_code == 404
    assert other.get(f"/blobs/{sha256(BIG)}").status_code == 404


def test_a_collected_blob_404s_in_another_process_at_once(client, other, registry_ctx):
    loose = b"uploaded, never referenced by a carton " * 100
    assert client.put(f"/api/v1/blobs/{sha256(loose)}", content=loose).status_code in (200, 201)
    assert other.head(f"/blobs/{sha256(loose)}").status_code == 200
    collect_garbage(registry_ctx, grace_seconds=0)
    assert other.head(f"/blobs/{sha256(loose)}").status_code == 404


def lose(ctx, sha: str) -> None:
    """Delete a file's bytes behind the index's back: its object, or its packs if chunked."""
    with ctx.sessions() as session:
        stored = load_files(session, [sha])[sha]
    if stored.ranges is None:
        assert ctx.blobs.delete(sha)
    for pack in {r.pack for r in stored.ranges or ()}:
        assert ctx.blobs.delete_pack(pack)


def test_damage_fsck_found_is_never_served_from_memory(client, other, registry_ctx):
    _manifest, carton_url = _pushed(client)
    _warm(other, carton_url)
    corrupt(registry_ctx, sha256(SMALL))  # same size: only the scrub sees it
    lose(registry_ctx, sha256(BIG))
    # Behind the index's back, a cache cannot know: it still answers as it did.
    assert other.get(carton_url).status_code == 200
    assert other.head(f"/blobs/{sha256(BIG)}").status_code == 200

    report = check_integrity(registry_ctx, verify_hashes=True)
    assert report.corrupt == [sha256(SMALL)] and report.missing == [sha256(BIG)]
    # fsck bumped the generation: every process checks the store again, and a small
    # blob's bytes are verified before they are kept, so nothing damaged is served.
    r = other.get(carton_url)
    assert r.status_code == 503 and sha256(SMALL) in r.json()["error"]
    r = other.get(f"{carton_url}?form=full")  # its first damaged member is the big one
    assert r.status_code == 503 and sha256(BIG) in r.json()["error"]
    assert other.head(carton_url).status_code == 503
    r = other.head(f"/blobs/{sha256(BIG)}")
    assert r.status_code == 503
    r = other.get(f"/blobs/{sha256(BIG)}")
    assert r.status_code == 503 and "a push of the same bytes heals it" in r.json()["error"]


@pytest.mark.settings(auth="all")
def test_a_revoked_token_is_refused_by_another_process_at_once(
    registry_ctx, other, other_ctx, monkeypatch
):
    token, _info = create_token(registry_ctx, "loader", "pull")
    auth = {"Authorization": f"Bearer {token}"}
    assert other.get("/api/v1/models", headers=auth).status_code == 200
    pusher, _info = create_token(registry_ctx, "ci", "push")
    pushed = other.post(
        "/api/v1/cartons",
        content=make_carton({"w/small.txt": SMALL}, model_name="m"),
        headers={"Authorization": f"Bearer {pusher}"},
    )
    carton_url = f"/cartons/{pushed.json()['manifest_sha256']}.carton"
    assert other.head(carton_url, headers=auth).status_code == 200
    real_sessions = other_ctx.sessions

    def no_session():
        raise AssertionError("a database session for a known token and carton")

    monkeypatch.setattr(other_ctx, "sessions", no_session)
    for _ in range(20):  # the token's scopes and the carton come from memory
        assert other.head(carton_url, headers=auth).status_code == 200
    monkeypatch.setattr(other_ctx, "sessions", real_sessions)
    revoke_token(registry_ctx, "loader")
    assert other.get("/api/v1/models", headers=auth).status_code == 401
