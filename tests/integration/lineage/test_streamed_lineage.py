"""Lineage's parent computed from streamed, spooled chunk lists (issue 27): the same
figures as the algorithm that loaded every chunk list, in memory that does not grow
with the cartons' chunk counts."""

from __future__ import annotations

import itertools
import random
import tempfile
import tracemalloc
from datetime import timedelta
from pathlib import Path

import pytest

from registry.services import chunk_spool, lineage
from registry.services.chunk_spool import ENTRY, ChunkSpool
from tests.integration.lineage.index_rows import T0, Index, random_registry, reference_parent

SMALL = {"SPOOL_BYTES": ENTRY * 50, "GROUP_RECORDS": 40, "READ_RECORDS": 7, "SEGMENT_ROWS": 2}


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("small", [False, True], ids=["default", "spilled"])
def test_same_parent_and_figures_as_the_whole_list_algorithm(
    registry_ctx, monkeypatch, seed, small
):
    rng = random.Random(seed)
    # Small sample, few candidates: the scores decide, and ties happen.
    monkeypatch.setattr(lineage, "SAMPLE_CHUNKS", rng.choice((1, 4, 16, 256)))
    monkeypatch.setattr(lineage, "WHOLE_FILES", rng.choice((1, 2, 64)))
    monkeypatch.setattr(lineage, "CANDIDATES", rng.choice((1, 3, 8)))
    spills = []
    if small:  # most cartons go through the partition files, in many groups
        for name, value in SMALL.items():
            monkeypatch.setattr(chunk_spool, name, value)
        spill = ChunkSpool._spill
        monkeypatch.setattr(ChunkSpool, "_spill", lambda self: spills.append(spill(self)))
    with registry_ctx.transaction() as session:
        made = random_registry(Index(session, rng), cartons_wanted=10)
    with registry_ctx.sessions() as session:
        results = [lineage.compute_parent(session, m) for m in made]
        assert results == [reference_parent(session, m) for m in made]
    assert any(parent for parent, _, _ in results)  # not vacuous: parents are found
    assert bool(spills) == small


def test_spool_reads_back_every_record_by_first_byte(monkeypatch):
    for name, value in SMALL.items():
        monkeypatch.setattr(chunk_spool, name, value)
    rng = random.Random(7)
    records = [bytes([rng.choice((0, 1, 255))]) + rng.randbytes(35) for _ in range(500)]
    with ChunkSpool() as spool:
        for i in range(0, 500, 9):
            spool.add(b"".join(records[i : i + 9]))
        assert spool.spilled
        directory = spool._dir
        groups = list(spool.groups())
        assert groups[0][0] == 0 and groups[-1][1] == 256
        assert all(a[1] == b[0] for a, b in itertools.pairwise(groups))
        back = [(d.hex(), n) for lo, hi in groups for d, n in spool.read(lo, hi)]
        for lo, hi in groups:
            assert all(lo <= d[0] < hi for d, _ in spool.read(lo, hi))
        assert sorted(back) == sorted((r[:32].hex(), int.from_bytes(r[32:])) for r in records)
        assert sum(spool.counts) == 500
        with pytest.raises(ValueError, match="36 bytes"):
            spool.add(b"x" * 35)
    assert directory is not None and not directory.exists()


def test_groups_hold_at_most_the_limit_unless_one_byte_holds_more():
    spool = ChunkSpool()
    spool.counts = [10] * 256
    spool.counts[7] = 100
    groups = list(spool.groups(limit=25))
    assert (7, 8) in groups
    for lo, hi in groups:
        assert sum(spool.counts[lo:hi]) <= 25 or hi - lo == 1


def big_pair(index: Index, rng: random.Random, chunks: int) -> str:
    """A carton of ``chunks`` chunks in 1,000-chunk packs and, before it, one sharing its
    largest file and half its other chunks. Chunk rows are left out (the whole file is
    what finds the candidate)."""
    packs = []
    for start in range(0, chunks, 1000):
        n = min(1000, chunks - start)
        packs.append(index.pack([(rng.randbytes(32), 65536) for _ in range(n)], False))
    half = len(packs) // 2
    large = index.chunked_file([(p, 0, 1000) for p in packs[:half]])
    rest = index.chunked_file([(p, 0, 1000) for p in packs[half:]])
    some = index.chunked_file([(p, 0, 500) for p in packs[half:]])
    index.carton({"a": large, "b": some}, T0)
    return index.carton({"a": large, "b": rest}, T0 + timedelta(seconds=1))


def peak(fn, *args):
    tracemalloc.start()
    try:
        result = fn(*args)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_chunk_count(registry_ctx, monkeypatch):
    """Spilling from 4,000 records on, 1,000-record groups: a 4,000-chunk carton and a
    40,000-chunk one (and candidate) peak alike, where the whole-list algorithm's peak
    grows tenfold."""
    monkeypatch.setattr(chunk_spool, "SPOOL_BYTES", ENTRY * 4000)
    monkeypatch.setattr(chunk_spool, "GROUP_RECORDS", 1000)
    monkeypatch.setattr(chunk_spool, "SEGMENT_ROWS", 4)
    rng = random.Random(3)
    with registry_ctx.transaction() as session:
        small, big = big_pair(Index(session, rng), rng, 4000), None
    with registry_ctx.transaction() as session:
        big = big_pair(Index(session, rng), rng, 40000)
    peaks = {}
    with registry_ctx.sessions() as session:
        lineage.compute_parent(session, small)  # one-time costs: compiled statements, caches
        reference_parent(session, small)
        for name, manifest in (("small", small), ("big", big)):
            result, peaks[name] = peak(lineage.compute_parent, session, manifest)
            reference, peaks[name + " before"] = peak(reference_parent, session, manifest)
            assert result == reference and result[0] is not None
    assert peaks["big before"] > 8 * peaks["small before"]  # what the test would catch
    assert peaks["big"] < 1.5 * peaks["small"] + 256 * 1024, peaks
    assert peaks["big"] < peaks["big before"] / 8, peaks


def test_a_failure_midway_leaves_no_partition_files(registry_ctx, monkeypatch, tmp_path):
    """The database failing while a candidate's records stream: the error propagates
    (``record_after_push`` logs it) and every spool's folder is gone."""
    for name, value in SMALL.items():
        monkeypatch.setattr(chunk_spool, name, value)
    made_dirs: list[str] = []
    mkdtemp, spools = tempfile.mkdtemp, tmp_path / "spools"
    spools.mkdir()

    def recording_mkdtemp(**kwargs):
        made_dirs.append(mkdtemp(dir=spools, **kwargs))
        return made_dirs[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", recording_mkdtemp)
    rng = random.Random(3)
    with registry_ctx.transaction() as session:
        made = random_registry(Index(session, rng), cartons_wanted=10)
    with registry_ctx.sessions() as session:
        target = max(made, key=lambda m: reference_parent(session, m)[1])
    streamed: list[str] = []
    real = lineage.segment_entries

    def failing(session, manifest):
        streamed.append(manifest)
        if len(streamed) == 2:  # the first candidate: one segment, then the error
            yield from itertools.islice(real(session, manifest), 1)
            raise RuntimeError("connection lost")
        yield from real(session, manifest)

    monkeypatch.setattr(lineage, "segment_entries", failing)
    with registry_ctx.sessions() as session, pytest.raises(RuntimeError, match="lost"):
        lineage.compute_parent(session, target)
    assert len(streamed) == 2 and made_dirs  # the carton's own records had spilled
    assert not any(Path(d).exists() for d in made_dirs)
    assert not list(spools.iterdir())
