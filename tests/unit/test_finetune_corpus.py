"""The fine-tune family generator: deterministic, well-formed, and honest about what changed."""

from __future__ import annotations

import hashlib
import itertools
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests import finetune
from tests.finetune import Change, MiB, WeightsFile

DATA_SIZE = 8 * MiB
REPO_ROOT = Path(__file__).resolve().parents[2]


def without(data: bytes, ranges: tuple[tuple[int, int], ...]) -> bytes:
    """``data`` with the (offset, length) ranges cut out."""
    kept, position = [], 0
    for start, length in sorted(ranges):
        kept.append(data[position:start])
        position = start + length
    kept.append(data[position:])
    return b"".join(kept)


def assert_disjoint_within(ranges: tuple[tuple[int, int], ...], size: int) -> None:
    end = 0
    for start, length in sorted(ranges):
        assert length > 0
        assert start >= end, "ranges overlap"
        end = start + length
    assert end <= size


def assert_alignment_holds(previous: WeightsFile, change: Change) -> None:
    """The declared alignment is real: cutting out new and dropped ranges leaves equal bytes,
    and no new range is a copy of the predecessor's bytes."""
    old, new = previous.to_bytes(), change.file.to_bytes()
    assert_disjoint_within(change.new, len(new))
    assert_disjoint_within(change.dropped, len(old))
    assert without(new, change.new) == without(old, change.dropped)
    for start, length in change.new:
        if length >= 4096:
            sample = new[start + length // 2 : start + length // 2 + 32]
            assert old.find(sample) == -1, "a new range's bytes occur in the predecessor"


@pytest.fixture(scope="module")
def single_variants() -> dict[str, Change]:
    return finetune.variants(DATA_SIZE, seed=7)


@pytest.fixture(scope="module")
def base_file() -> WeightsFile:
    return finetune.base(DATA_SIZE, seed=7)


def test_same_seed_same_bytes_in_another_process(base_file: WeightsFile) -> None:
    script = (
        "import hashlib, sys; from tests import finetune; "
        f"f = finetune.family({DATA_SIZE}, seed=7)[-1].file; "
        "sys.stdout.write(hashlib.sha256(f.to_bytes()).hexdigest())"
    )
    there = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout
    here = finetune.family(DATA_SIZE, seed=7)[-1].file.to_bytes()
    assert there == hashlib.sha256(here).hexdigest()


def test_different_seeds_share_no_data(base_file: WeightsFile) -> None:
    other = finetune.base(DATA_SIZE, seed=8).to_bytes()
    mine = base_file.to_bytes()
    sample = mine[len(mine) // 2 : len(mine) // 2 + 32]
    assert other.find(sample) == -1


def test_base_is_a_wellformed_safetensors_like_file(base_file: WeightsFile) -> None:
    data = base_file.to_bytes()
    (header_length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_length])
    assert next(iter(header)) == "__metadata__"
    tensors = {name: spec for name, spec in header.items() if name != "__metadata__"}
    end = 0
    for spec in tensors.values():
        begin, stop = spec["data_offsets"]
        assert begin == end
        item = finetune.ITEM_SIZE[spec["dtype"]]
        assert stop - begin == spec["shape"][0] * spec["shape"][1] * item
        end = stop
    assert end == DATA_SIZE == base_file.data_size
    assert len(data) == 8 + header_length + DATA_SIZE == base_file.size
    assert list(tensors)[-1] == "lm_head.weight"
    assert tensors["lm_head.weight"]["data_offsets"][0] == DATA_SIZE - finetune.tail_bytes(
        DATA_SIZE
    )


def test_random_data_does_not_compress(base_file: WeightsFile) -> None:
    import zlib

    data = base_file.to_bytes()[-MiB:]
    assert len(zlib.compress(data, 6)) > 0.99 * len(data)


def test_streams_in_bounded_pieces_and_writes_the_same_bytes(
    base_file: WeightsFile, tmp_path: Path
) -> None:
    pieces = list(base_file.iter_bytes())
    assert max(len(piece) for piece in pieces[1:]) <= finetune.BLOCK_SIZE
    path = tmp_path / "model.safetensors"
    base_file.write(path)
    assert path.read_bytes() == b"".join(pieces)


def test_rejects_a_size_that_is_not_whole_rows() -> None:
    with pytest.raises(ValueError):
        finetune.base(8 * MiB + 1)
    with pytest.raises(ValueError):
        finetune.base(2 * MiB)


@pytest.mark.parametrize("name", sorted(finetune.VARIANTS))
def test_each_variant_declares_its_changed_bytes_exactly(
    name: str, base_file: WeightsFile, single_variants: dict[str, Change]
) -> None:
    assert_alignment_holds(base_file, single_variants[name])


@pytest.mark.parametrize("name", ["regions_rewritten", "tail_replaced"])
def test_same_size_variants_differ_exactly_in_the_declared_ranges(
    name: str, base_file: WeightsFile, single_variants: dict[str, Change]
) -> None:
    change = single_variants[name]
    old, new = base_file.to_bytes(), change.file.to_bytes()
    assert len(old) == len(new)
    assert change.new == change.dropped
    assert without(old, change.new) == without(new, change.new)
    differing = sum(
        a != b
        for start, length in change.new
        for a, b in zip(old[start : start + length], new[start : start + length], strict=True)
    )
    # New random bytes equal the old ones by chance 1 time in 256.
    assert 0.99 * change.changed_bytes < differing <= change.changed_bytes


def test_regions_rewritten_retrains_three_tensors_of_1_to_4_mib(
    single_variants: dict[str, Change],
) -> None:
    change = single_variants["regions_rewritten"]
    assert len(change.new) == 3
    assert all(MiB <= length <= 4 * MiB for _, length in change.new)


def test_tail_replaced_rewrites_the_last_tensor(
    base_file: WeightsFile, single_variants: dict[str, Change]
) -> None:
    change = single_variants["tail_replaced"]
    tail = finetune.tail_bytes(DATA_SIZE)
    assert change.new == ((base_file.size - tail, tail),)


def test_header_grown_changes_a_few_bytes_and_shifts_the_rest(
    base_file: WeightsFile, single_variants: dict[str, Change]
) -> None:
    change = single_variants["header_grown"]
    growth = change.file.size - base_file.size
    assert 0 < growth < 40
    assert change.changed_bytes < 2 * growth
    old_header = len(base_file.header)
    assert change.file.to_bytes()[old_header + growth :] == base_file.to_bytes()[old_header:]


def test_insertion_and_deletion_change_the_size_by_256_kib(
    base_file: WeightsFile, single_variants: dict[str, Change]
) -> None:
    inserted, deleted = single_variants["inserted_mid"], single_variants["deleted_mid"]
    header_growth = len(inserted.file.header) - len(base_file.header)
    assert inserted.file.size - base_file.size == 256 * 1024 + header_growth
    header_growth = len(deleted.file.header) - len(base_file.header)
    assert base_file.size - deleted.file.size == 256 * 1024 - header_growth
    # Shifted data_offsets rewrite part of the JSON, never more than the header.
    for change, data_new in ((inserted, 256 * 1024), (deleted, 0)):
        assert data_new <= change.changed_bytes < data_new + len(change.file.header)
    middle = base_file.size // 2
    data_start = len(inserted.file.header)
    (insert_start, _), *_ = [(s, n) for s, n in inserted.new if s >= data_start]
    assert abs(insert_start - middle) < 4 * MiB


def test_layer_appended_adds_new_bytes_at_the_end(
    base_file: WeightsFile, single_variants: dict[str, Change]
) -> None:
    change = single_variants["layer_appended"]
    start, length = change.new[-1]
    assert start + length == change.file.size
    assert length == 512 * 1024  # min(2 MiB, data/16)


def test_family_is_a_chain_of_declared_changes() -> None:
    versions = finetune.family(DATA_SIZE, seed=7)
    assert len(versions) == 1 + len(finetune.FAMILY_STEPS)
    first = versions[0]
    assert first.changed_bytes == first.file.size
    for previous, change in itertools.pairwise(versions):
        assert change.file.generation == previous.file.generation + 1
        assert_alignment_holds(previous.file, change)
    sizes = [version.file.size for version in versions]
    assert len(set(sizes)) > 2, "the chain shifts bytes, not only rewrites them"
