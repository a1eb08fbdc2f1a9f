"""A fine-tune family through the HTTP API on both backend pairs: each version stores
only what changed, every version reads back exactly, and deleting one frees its bytes.

The family (``tests/finetune.py``) is a 16 MiB base and six successive checkpoints
(tensors retrained, a header grown, a layer appended, bytes inserted and deleted
mid-file, the last tensor replaced), each declaring the bytes that really changed.
"""

from __future__ import annotations

import pytest

from registry.services.fsck import check_integrity
from registry.services.gc import collect_garbage
from tests import finetune
from tests.finetune import Change, MiB
from tests.helpers import sha
from tests.integration.chunks.helpers import (
    check_pulls,
    chunk_lengths,
    push,
    stats,
    weights_carton,
)

MODEL = "finetune"
DATA_SIZE = 16 * MiB
SEED = 1
"""A seed whose later versions retrain most of the base: deleting v1 rewrites its pack."""
SLACK = 1.5
"""Stored bytes may be this many times the bytes that really changed..."""
CHUNKS_ALLOWED = 4
"""...plus this many chunks of the largest size per version (cuts around each edit)."""


@pytest.fixture(scope="module")
def family() -> list[tuple[Change, bytes]]:
    return [(change, change.file.to_bytes()) for change in finetune.family(DATA_SIZE, SEED)]


def edges(change: Change) -> list[int]:
    """Where a version's bytes switch between its predecessor's and new ones."""
    return sorted({at for start, length in change.new for at in (start, start + length)})


def test_each_version_stores_only_what_changed(client, registry_ctx, family) -> None:
    allowance = CHUNKS_ALLOWED * registry_ctx.chunk_params.max_size
    manifests = []
    for number, (change, data) in enumerate(family, start=1):
        before = stats(client)["stored_bytes"]
        body = push(client, weights_carton(data, MODEL))
        added = stats(client)["stored_bytes"] - before
        assert body["version"] == number
        assert body["bytes_stored"] == added  # the push says what it really added
        assert added <= SLACK * change.changed_bytes + allowance, (number, added, change)
        manifests.append(body["manifest_sha256"])

    declared = sum(change.changed_bytes for change, _ in family)
    stored = stats(client)["stored_bytes"]
    assert stored <= SLACK * declared + len(family) * allowance
    file_level = sum(len(data) for _, data in family)  # each version's file stored whole
    assert stored <= 0.5 * file_level, f"saved only {1 - stored / file_level:.0%}"

    for number, (manifest, (change, data)) in enumerate(zip(manifests, family, strict=True)):
        check_pulls(client, manifest, data, edges=edges(change), seed=number)


def test_deleting_a_version_frees_its_exclusive_bytes(client, registry_ctx, family) -> None:
    manifests = [push(client, weights_carton(data, MODEL))["manifest_sha256"] for _, data in family]
    chunks = [chunk_lengths(registry_ctx, [data]) for _, data in family]
    kept = set().union(*chunks[1:])
    exclusive = sum(n for h, n in chunks[0].items() if h not in kept)
    base = family[0][1]
    # Its pack holds nothing else, so GC rewrites it (under half of it is live).
    assert exclusive > 0.5 * len(base), "the test needs a base mostly superseded"

    assert client.delete(f"/api/v1/models/{MODEL}/versions/1").status_code == 200
    before = stats(client)["stored_bytes"]
    first = collect_garbage(registry_ctx, grace_seconds=0)
    assert first.deleted == [sha(base)]
    assert (first.packs.packs_rewritten, first.packs.packs_deleted) == (1, 0)
    retired = stats(client)["stored_bytes"]
    assert retired == before + len(base) - exclusive  # the old pack stays for its readers
    second = collect_garbage(registry_ctx, grace_seconds=0)
    assert second.packs.pack_bytes_freed == len(base)
    assert before - stats(client)["stored_bytes"] == exclusive
    assert collect_garbage(registry_ctx, grace_seconds=0).bytes_freed == 0

    assert client.get(f"/blobs/{sha(base)}").status_code == 404
    for number, (change, data) in enumerate(family[1:], start=2):
        check_pulls(client, manifests[number - 1], data, edges=edges(change), seed=number)
    report = check_integrity(registry_ctx, verify_hashes=True)
    assert report.ok, report
    assert report.orphans == report.orphan_packs == []
