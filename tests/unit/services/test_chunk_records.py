"""Chunk upload bodies read as records out of whatever pieces the body arrives in."""

from __future__ import annotations

import io
import random
import struct

import pytest

from registry.chunking import chunk_hash
from registry.errors import ChunkMismatch, InvalidBody
from registry.services.chunk_transfer import _records


class PiecewiseBody(io.RawIOBase):
    """A body that hands out the given pieces, one per read (as StreamedBody does)."""

    def __init__(self, pieces: list[bytes]) -> None:
        super().__init__()
        self.pieces = list(pieces)

    def readable(self) -> bool:
        return True

    def read(self, n: int | None = -1) -> bytes:
        return self.pieces.pop(0) if self.pieces else b""


def body_of(chunks: list[bytes]) -> bytes:
    return b"".join(struct.pack(">32sI", bytes.fromhex(chunk_hash(c)), len(c)) + c for c in chunks)


def split(data: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(data)), 40))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


@pytest.mark.parametrize("seed", range(5))
def test_records_come_out_whole_whatever_the_pieces(seed):
    rng = random.Random(seed)
    chunks = [rng.randbytes(rng.randint(1, 5000)) for _ in range(30)]
    got = list(_records(PiecewiseBody(split(body_of(chunks), rng)), 8192))
    assert [bytes(d) for _, d in got] == chunks
    assert [n for n, _ in got] == [chunk_hash(c) for c in chunks]


def test_a_chunk_within_one_piece_is_a_view_of_it_not_a_copy():
    """Including one that starts a piece (its header ended the previous one)."""
    body = body_of([b"a" * 100, b"b" * 200])
    pieces = [body[: len(body) - 200], body[len(body) - 200 :]]
    got = list(_records(PiecewiseBody(pieces), 8192))
    assert [bytes(d) for _, d in got] == [b"a" * 100, b"b" * 200]
    assert isinstance(got[0][1], memoryview)
    assert got[1][1] is pieces[1] or isinstance(got[1][1], memoryview)  # not a joined copy


@pytest.mark.parametrize(
    ("body", "error", "words"),
    [
        (body_of([b"xyz"])[:-1], InvalidBody, "ends inside chunk"),
        (body_of([b"xyz"])[:20], InvalidBody, "inside a record header"),
        (body_of([b"x" * 9000]), InvalidBody, "chunks are 1 to 8192"),
        (body_of([b"xyz"])[:-3] + b"xyZ", ChunkMismatch, "hash to"),
    ],
    ids=["short chunk", "short header", "oversized chunk", "wrong bytes"],
)
def test_bad_records_are_refused(body, error, words):
    halves = [body[: len(body) // 2], body[len(body) // 2 :]]
    with pytest.raises(error, match=words):
        list(_records(PiecewiseBody(halves), 8192))
