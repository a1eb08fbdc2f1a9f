"""fsck on damaged packs, both backend pairs: a rotten byte, a lost pack, a short pack.

Damage is done behind the store's back (``tests/rawstore.py``). fsck names the pack,
the chunk and every file using it, and marks the versions of those files UNAVAILABLE;
versions whose bytes are elsewhere stay READY.
"""

from __future__ import annotations

import random

import pytest
from sqlalchemy import select

from registry.db.tables import Pack, Version
from registry.services.chunkstore.layout import parse_pack_table
from registry.services.chunkstore.reader import load_file
from registry.services.fsck import check_integrity
from tests.helpers import sha
from tests.integration.chunks.helpers import check_pulls, push, weights_carton
from tests.rawstore import pack_layout_key, raw_delete, raw_get, raw_set

MiB = 1024 * 1024
_rng = random.Random(13)
BASE = _rng.randbytes(3 * MiB)
VARIANT = BASE[: 2 * MiB] + _rng.randbytes(100_000) + BASE[2 * MiB :]
OTHER = _rng.randbytes(MiB)
ROT_AT = MiB  # in the bytes the base and the variant share


@pytest.fixture
def pushed(client) -> dict[str, str]:
    """alpha v1 (the base), alpha v2 (a variant of it), beta v1 (unrelated): manifests."""
    return {
        name: push(client, weights_carton(data, model))["manifest_sha256"]
        for name, model, data in (
            ("alpha1", "alpha", BASE),
            ("alpha2", "alpha", VARIANT),
            ("beta", "beta", OTHER),
        )
    }


def base_pack(ctx) -> str:
    """The pack the base's bytes went to (the variant reads its shared part there too)."""
    with ctx.sessions() as s:
        stored = load_file(s, sha(BASE))
    assert stored is not None and stored.ranges is not None
    assert len({r.pack for r in stored.ranges}) == 1
    return stored.ranges[0].pack


def chunk_at(ctx, pack: str, offset: int) -> tuple[int, str]:
    """(index, BLAKE3) of the pack's chunk holding byte ``offset``."""
    with ctx.sessions() as s:
        table = s.scalar(select(Pack.chunk_table).where(Pack.name == pack))
    start = 0
    for idx, (digest, length) in enumerate(parse_pack_table(table)):
        if start <= offset < start + length:
            return idx, digest
        start += length
    raise AssertionError(f"offset {offset} is past the end of pack {pack}")


def states(ctx) -> dict[str, tuple[str, str]]:
    with ctx.sessions() as s:
        return {v.manifest_sha256: (v.state, v.state_reason) for v in s.scalars(select(Version))}


def assert_marked(ctx, pushed: dict[str, str], *words: str) -> None:
    """alpha's two versions UNAVAILABLE for a reason naming their files and ``words``."""
    now = states(ctx)
    for name, data in (("alpha1", BASE), ("alpha2", VARIANT)):
        state, reason = now[pushed[name]]
        assert state == "UNAVAILABLE", name
        assert sha(data) in reason and all(w in reason for w in words), reason
    assert now[pushed["beta"]] == ("READY", "")


def test_a_rotten_byte_in_a_pack_names_pack_chunk_and_files(client, registry_ctx, pushed):
    pack = base_pack(registry_ctx)
    idx, digest = chunk_at(registry_ctx, pack, ROT_AT)
    rotten = bytearray(raw_get(registry_ctx.blobs, pack_layout_key(pack)))
    rotten[ROT_AT] ^= 0x40
    raw_set(registry_ctx.blobs, pack_layout_key(pack), bytes(rotten))

    quick = check_integrity(registry_ctx)  # right size: only hashing can tell
    assert quick.ok and quick.corrupt_chunks == []
    assert {state for state, _ in states(registry_ctx).values()} == {"READY"}

    report = check_integrity(registry_ctx, verify_hashes=True)
    assert not report.ok
    files = sorted([sha(BASE), sha(VARIANT)])
    assert report.corrupt_chunks == [{"pack": pack, "idx": idx, "hash": digest, "files": files}]
    assert report.corrupt == files
    assert report.missing == report.wrong_size == []
    assert report.packs_missing == report.packs_wrong_size == []
    assert report.affected_cartons == sorted([pushed["alpha1"], pushed["alpha2"]])
    assert report.packs_checked == 3 and report.chunks_hashed > 40
    assert_marked(registry_ctx, pushed, pack, f"corrupt chunk {idx}")
    check_pulls(client, pushed["beta"], OTHER)


def test_a_deleted_pack_makes_its_files_missing(client, registry_ctx, pushed):
    pack = base_pack(registry_ctx)
    raw_delete(registry_ctx.blobs, pack_layout_key(pack))

    report = check_integrity(registry_ctx)
    assert report.packs_missing == [pack] and report.packs_wrong_size == []
    assert report.missing == sorted([sha(BASE), sha(VARIANT)])
    assert report.wrong_size == report.corrupt == []
    assert_marked(registry_ctx, pushed, f"missing pack {pack}")
    assert check_integrity(registry_ctx, verify_hashes=True).missing == report.missing
    check_pulls(client, pushed["beta"], OTHER)


def test_a_truncated_pack_has_the_wrong_size(client, registry_ctx, pushed):
    pack = base_pack(registry_ctx)
    whole = raw_get(registry_ctx.blobs, pack_layout_key(pack))
    raw_set(registry_ctx.blobs, pack_layout_key(pack), whole[:-1000])

    report = check_integrity(registry_ctx)
    assert report.packs_wrong_size == [pack] and report.packs_missing == []
    assert report.wrong_size == sorted([sha(BASE), sha(VARIANT)])
    assert report.missing == report.corrupt == []
    assert_marked(registry_ctx, pushed, f"pack {pack} of the wrong size", str(len(whole)))
    check_pulls(client, pushed["beta"], OTHER)
