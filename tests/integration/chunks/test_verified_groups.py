"""Verified reads check groups of chunks on two threads, a few groups ahead of the one
handed on (``chunkstore.verified``): damage is caught wherever it sits in a group, the
first damaged chunk is the one named and recorded, every good group before it is handed
on whole and no byte of it (or after it) is. Both backend pairs: the filesystem's verify
threads read their groups themselves, S3's come from one stream."""

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
    assert len(sent) == second.start - base  # the good group before it, whole
    with registry_ctx.sessions() as s:
        recorded = s.scalars(select(DamagedChunk.idx)).all()
    assert recorded == [min(bad)]


@pytest.mark.parametrize("keep_groups", [1, 3])
def test_a_pack_cut_short_ends_the_read_after_the_groups_it_still_holds(
    client, registry_ctx, keep_groups
):
    """A backup restored short: groups ahead of the cut are handed on (read ahead or not),
    the first group past it is not, and the pack is recorded missing."""
    push(client, weights_carton(WEIGHTS, "cut"))
    stored = stored_weights(registry_ctx)
    pack, base = stored.ranges[0].pack, stored.ranges[0].pack_offset
    table = verified.TABLES.get(registry_ctx, [pack])[pack]
    groups = verified._groups(
        [(pack, base, base + len(WEIGHTS))], {pack: table}, verified.GROUP_BYTES
    )
    assert len(groups) > keep_groups
    raw = raw_get(registry_ctx.blobs, pack_layout_key(pack)) or b""
    raw_set(registry_ctx.blobs, pack_layout_key(pack), raw[: groups[keep_groups].end - 1])

    sent = bytearray()
    with pytest.raises(DamagedRead) as caught:
        for piece in read_blob(registry_ctx, stored):
            sent += piece
    assert caught.value.idx is None and caught.value.pack == pack
    assert bytes(sent) == WEIGHTS[: groups[keep_groups].start - base]
    with registry_ctx.sessions() as s:  # every chunk of the pack, as for a missing pack
        recorded = sorted(s.scalars(select(DamagedChunk.idx)).all())
    assert recorded == list(range(len(table.hashes)))


def test_a_read_closed_early_leaves_no_check_running(client, registry_ctx):
    """A client that goes away after the first piece: the read ahead is cancelled or
    finished, never left holding the store's stream."""
    push(client, weights_carton(WEIGHTS, "closed"))
    stored = stored_weights(registry_ctx)
    reader = verified.iter_verified(registry_ctx, stored, 0, len(WEIGHTS))
    first = next(reader)
    assert first == WEIGHTS[: len(first)]
    reader.close()
    verified._HASHERS.submit(lambda: None).result()  # the pool is still usable
    assert b"".join(read_blob(registry_ctx, stored)) == WEIGHTS
