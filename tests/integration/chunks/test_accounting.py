"""Honest accounting on both backend pairs: ``stored_bytes`` is what the store holds.

A mixed workload (whole and chunked files, variants, a rejected push, a blob PUT on its
own, a file sent as chunks, deletes) and GC; at every step the stats agree with the
bytes really there: the files under the filesystem store's root, the bucket listing.
"""

from __future__ import annotations

import random

from registry.services.gc import collect_garbage
from tests.helpers import make_carton, sha
from tests.integration.api.test_chunks import upload
from tests.integration.chunks.helpers import push, stats, weights_carton
from tests.rawstore import stored_object_bytes

MiB = 1024 * 1024
TOLERANCE = 0.01


def assert_honest(client, ctx, step: str) -> None:
    claimed = stats(client)["stored_bytes"]
    actual = stored_object_bytes(ctx.blobs)
    assert abs(claimed - actual) <= TOLERANCE * actual, (step, claimed, actual)


def test_stored_bytes_are_the_bytes_in_the_store(client, registry_ctx):
    rng = random.Random(5)
    weights = rng.randbytes(3 * MiB)
    variant = weights[:MiB] + rng.randbytes(300_000)  # v1's pack: mostly v1's own, later
    small, medium = b'{"layers": 12}', rng.randbytes(200_000)

    push(client, weights_carton(weights, "acct", **{"config.json": small, "vocab": medium}))
    push(client, weights_carton(variant, "acct", **{"config.json": small}))
    push(client, weights_carton(rng.randbytes(2 * MiB), "other"))
    assert_honest(client, registry_ctx, "pushed")

    gone = sha(b"listed, never sent")
    refused = make_carton(
        {"model/w.bin": rng.randbytes(MiB)}, model_name="acct", absent={"model/x": gone}
    )
    assert client.post("/api/v1/cartons", content=refused).status_code == 400
    loose = rng.randbytes(30_000)
    assert client.put(f"/api/v1/blobs/{sha(loose)}", content=loose).status_code == 201
    upload(client, rng.randbytes(MiB + 7))  # sent as chunks, assembled, used by no carton
    assert_honest(client, registry_ctx, "refused and loose uploads")

    assert client.delete("/api/v1/models/acct/versions/1").status_code == 200
    assert client.delete("/api/v1/models/other").status_code == 200
    assert_honest(client, registry_ctx, "deleted")

    first = collect_garbage(registry_ctx, grace_seconds=0)
    assert first.packs.packs_deleted >= 2 and first.packs.packs_rewritten == 1
    assert_honest(client, registry_ctx, "collected, the rewritten pack retired")
    collect_garbage(registry_ctx, grace_seconds=0)
    assert_honest(client, registry_ctx, "collected")
    assert stats(client)["stored_bytes"] == stored_object_bytes(registry_ctx.blobs)
