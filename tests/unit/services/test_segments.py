"""Segments: chunk references merged into runs as they come, one Segment per run."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from registry.services.chunkstore.layout import ChunkRef, Segment, Segments, segments_of


def test_runs_break_at_another_pack_a_gap_or_a_repeat() -> None:
    refs = [
        ChunkRef("a", 0, 0, 10),
        ChunkRef("a", 1, 10, 5),  # same run
        ChunkRef("b", 0, 0, 7),  # another pack
        ChunkRef("b", 2, 20, 3),  # a gap in the pack
        ChunkRef("b", 2, 20, 3),  # the same chunk again
    ]
    assert segments_of(refs) == [
        Segment("a", 0, 2, 0, 0, 15),
        Segment("b", 0, 1, 15, 0, 7),
        Segment("b", 2, 3, 22, 20, 3),
        Segment("b", 2, 3, 25, 20, 3),
    ]
    assert segments_of([]) == []


def _reference(refs: list[ChunkRef]) -> list[Segment]:
    """The runs by brute force: split wherever a reference does not follow the last."""
    out: list[list[ChunkRef]] = []
    for ref in refs:
        last = out[-1][-1] if out else None
        follows = (
            last is not None
            and ref.pack == last.pack
            and ref.idx == last.idx + 1
            and ref.offset == last.offset + last.length
        )
        if follows:
            out[-1].append(ref)
        else:
            out.append([ref])
    segments, at = [], 0
    for run in out:
        length = sum(r.length for r in run)
        segments.append(
            Segment(run[0].pack, run[0].idx, run[-1].idx + 1, at, run[0].offset, length)
        )
        at += length
    return segments


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 3), st.integers(1, 4)), max_size=40)
)
def test_incremental_runs_match_the_brute_force(steps: list[tuple[str, int, int]]) -> None:
    refs, position = [], {"a": (0, 0), "b": (0, 0)}
    for pack, skip, length in steps:
        idx, offset = position[pack]
        idx, offset = idx + (skip == 3), offset + (skip == 3) * 9
        refs.append(ChunkRef(pack, idx, offset, length))
        position[pack] = (idx + 1, offset + length)
    incremental = Segments()
    for ref in refs:
        incremental.add(ref)
    assert incremental.result() == _reference(refs)
