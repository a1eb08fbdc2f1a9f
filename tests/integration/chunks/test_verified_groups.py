"""Verified reads hash a group's chunks on two threads (``chunkstore.verified``): damage
is caught wherever it sits in a group, the first damaged chunk is the one named and
recorded, and no byte of it (or after it) is handed on. Both backend pairs."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import select

from registry.db.tables import DamagedChunk
from registry.services.chunkstore import verified
from registry.services.chunkstore.reader import load_file
from registry.services.chunkstore.verified import DamagedRead
from registry.services.stored_blobs import read_blob
from tests.helpers import sha
from tests.integration.chunks.helpers import push, weights_carton
from tests.rawstore import pack_layout_key, raw_get, raw_set

MiB = 1024 * 1024
WEIGHTS = random.Random(31).randbytes(3 * MiB)


def stored_weights(ctx):
    with ctx.sessions() as s:
        stored = load_file(s, sha(WEIGHTS))
    assert stored is not None and stored.ranges is not None
    assert len(stored.ranges) == 1  # one run of one pack
    return stored


@pytest.mark.parametrize("where", ["first of a group", "last of a group", "later half", "two"])
def test_damage_anywhere_in_a_group_stops_the_read_before_it(client, registry_ctx, where):
    push(client, weights_carton(WEIGHTS, "grouped"))
    stored = stored_weights(registry_ctx)
    pack, base = stored.ranges[0].pack, stored.ranges[0].pack_offset
    table = verified.TABLES.get(registry_ctx, [pack])[pack]
    span = [(pack, base, base + len(WEIGHTS))]
    groups = verified._groups(span, {pack: table}, verified.GROUP_BYTES)
    assert len(groups) >= 2 and groups[0].end - groups[0].start <= verified.GROUP_BYTES
    second = groups[1]
    last_of_second = verified.bisect_left(table.starts, second.end) - 1
    bad = {
        "first of a group": [second.first],
        "last of a group": [last_of_second],
        "later half": [(second.first + last_of_second + 1) // 2 + 1],
        "two": [second.first + 1, last_of_second],  # one in each half: the first is named
    }[where]
    raw = bytearray(raw_get(registry_ctx.blobs, pack_layout_key(pack)) or b"")
    for idx in bad:
        raw[table.starts[idx] + 7] ^= 0x40
    raw_set(registry_ctx.blobs, pack_layout_key(pack), bytes(raw))

    sent = bytearray()
    with pytest.raises(DamagedRead) as caught:
        for piece in read_blob(registry_ctx, stored):
            sent += piece
    assert caught.value.idx == min(bad) and caught.value.pack == pack
    assert bytes(sent) == WEIGHTS[: len(sent)]  # nothing wrong was handed on
    assert len(sent) <= table.starts[min(bad)] - base
    with registry_ctx.sessions() as s:
        recorded = s.scalars(select(DamagedChunk.idx)).all()
    assert recorded == [min(bad)]
