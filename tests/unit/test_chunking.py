"""Content-defined chunking: fed in any pieces, cut exactly as one cut over the whole."""

from __future__ import annotations

import os
import random

import blake3
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.chunking import Chunker, ChunkParams, chunk_hash, iter_chunks

SMALL = ChunkParams(avg_size=1024, min_size=256, max_size=4096)


def whole_cut(params: ChunkParams, data: bytes) -> list[bytes]:
    return [bytes(c.data) for c in params.fastcdc().cut_buf(data)]


def pieces(data: bytes, sizes: list[int]) -> list[bytes]:
    out, at, i = [], 0, 0
    while at < len(data):
        n = sizes[i % len(sizes)] if sizes else len(data)
        out.append(data[at : at + n])
        at += n
        i += 1
    return out


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(min_size=0, max_size=60_000),
    sizes=st.lists(st.integers(min_value=1, max_value=9_000), min_size=1, max_size=8),
    # 1: cut at every feed, the hardest case for the horizon; larger: joins of many pieces
    batch=st.sampled_from([1, 3 * SMALL.max_size, 16 * SMALL.max_size]),
)
def test_pieces_cut_like_the_whole(data: bytes, sizes: list[int], batch: int) -> None:
    chunker = Chunker(SMALL, batch=batch)
    got: list[bytes] = []
    for piece in pieces(data, sizes):
        got.extend(chunker.feed(piece))
    got.extend(chunker.finish())
    assert got == whole_cut(SMALL, data)
    assert b"".join(got) == data


def test_a_batch_ending_on_a_max_size_chunk_keeps_it() -> None:
    """Zeros have no cut point: FastCDC cuts them at ``max_size``, even where the input
    ends, so a batch of exactly that many bytes is a final chunk, not one to cut again."""
    chunker = Chunker(SMALL, batch=1)
    assert [len(c) for c in chunker.feed(bytes(2 * SMALL.max_size))] == [SMALL.max_size] * 2
    assert [len(c) for c in chunker.feed(bytes(SMALL.max_size - 1))] == []
    assert [len(c) for c in chunker.finish()] == [SMALL.max_size - 1]


def test_default_params_on_megabytes_in_odd_pieces() -> None:
    params = ChunkParams()
    data = os.urandom(6 * 1024 * 1024) + bytes(2 * 1024 * 1024) + os.urandom(12345)
    rng = random.Random(7)
    sizes = [rng.choice([1, 17, 4096, 65536, 1 << 20, 3 << 20]) for _ in range(50)]
    got = list(iter_chunks(params, iter(pieces(data, sizes))))
    assert got == whole_cut(params, data)
    assert all(params.min_size <= len(c) <= params.max_size for c in got[:-1])


def test_an_insertion_realigns_within_a_few_chunks() -> None:
    params = ChunkParams()
    base = os.urandom(4 * 1024 * 1024)
    edited = base[:1_000_000] + b"inserted bytes" + base[1_000_000:]
    before = {chunk_hash(c) for c in iter_chunks(params, iter([base]))}
    after = [chunk_hash(c) for c in iter_chunks(params, iter([edited]))]
    new = [h for h in after if h not in before]
    assert 1 <= len(new) <= 3


def test_chunk_names_are_blake3_hex() -> None:
    assert chunk_hash(b"abc") == blake3.blake3(b"abc").hexdigest()
    assert ChunkParams.from_json(ChunkParams().as_json()) == ChunkParams()
