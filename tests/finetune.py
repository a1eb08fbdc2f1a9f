"""A deterministic "fine-tune family" of single weights files, for chunk-level dedup.

The base is a safetensors-like file: an 8-byte little-endian header length, a JSON
header (``__metadata__`` first, then every tensor's dtype, shape and data_offsets in
data order; unpadded, which safetensors allows), then the tensor data: seeded random
bytes, so nothing compresses and nothing repeats by accident.

A file is described, not held: each tensor's data is a list of segments of seeded
pseudo-random streams, generated in 1 MiB blocks on demand, so a file of any size
streams (``WeightsFile.iter_bytes``, ``WeightsFile.write``) in constant memory and a
variant can reuse any range of its predecessor's bytes.

Every variant function takes a predecessor and returns a :class:`Change`: the new file
and the regions that really changed. **Changed bytes** are defined by an alignment of
the variant with its predecessor: the variant, with its ``new`` regions cut out, equals
the predecessor with its ``dropped`` regions cut out. ``changed_bytes`` is the total
length of the ``new`` regions: the rewritten and inserted bytes (a deletion adds none).
In the data section the alignment follows the edit (a retrained tensor is new in
full, an inserted tensor is new, a removed range is dropped). In the header, the
8-byte length field counts from its first to its last differing byte, and the JSON
text counts between its common prefix and common suffix with the predecessor's (a
new metadata key costs its own bytes; shifted data_offsets cost the span of JSON text
they cover). The unit tests check every declaration against the real bytes.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

KiB = 1024
MiB = 1024 * KiB

BLOCK_SIZE = MiB
"""Streams are generated in blocks of this size: the unit of random access."""

ROW_BYTES = 4 * KiB
"""Every tensor is a whole number of 4 KiB rows, so every size below is a multiple."""

ITEM_SIZE = {"F32": 4, "BF16": 2}

LAYER_TENSOR_SIZES = (256 * KiB, 512 * KiB, MiB, 2 * MiB, 3 * MiB, 4 * MiB)
LAYER_PROJECTIONS = (
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
)
RETRAINED_TENSORS = 3
RETRAINED_MIN, RETRAINED_MAX = MiB, 4 * MiB
INSERTED_TENSOR_BYTES = 256 * KiB
DELETED_BYTES = 256 * KiB
TAIL_MAX_BYTES = 8 * MiB
APPENDED_MAX_BYTES = 2 * MiB
MIN_DATA_SIZE = 4 * MiB
"""Room for the layout: a middle tensor larger than DELETED_BYTES, a tail of 512 KiB."""


@dataclass(frozen=True)
class Segment:
    """``length`` bytes of the seeded stream ``stream``, starting at ``offset``."""

    stream: str
    offset: int
    length: int


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype: str
    segments: tuple[Segment, ...]

    @property
    def nbytes(self) -> int:
        return sum(segment.length for segment in self.segments)

    @property
    def shape(self) -> list[int]:
        """Rows of 4 KiB: the shape only has to agree with the size."""
        return [self.nbytes // ROW_BYTES, ROW_BYTES // ITEM_SIZE[self.dtype]]


@dataclass(frozen=True)
class WeightsFile:
    """One version of the weights file; ``generation`` keeps each version's new streams apart."""

    seed: int
    generation: int
    tensors: tuple[Tensor, ...]
    metadata: tuple[tuple[str, str], ...] = (("format", "pt"),)

    @property
    def header_json(self) -> bytes:
        header: dict[str, object] = {"__metadata__": dict(self.metadata)}
        begin = 0
        for tensor in self.tensors:
            end = begin + tensor.nbytes
            header[tensor.name] = {
                "dtype": tensor.dtype,
                "shape": tensor.shape,
                "data_offsets": [begin, end],
            }
            begin = end
        return json.dumps(header, separators=(",", ":")).encode()

    @property
    def header(self) -> bytes:
        """The length field and the JSON: everything before the tensor data."""
        header_json = self.header_json
        return struct.pack("<Q", len(header_json)) + header_json

    @property
    def data_size(self) -> int:
        return sum(tensor.nbytes for tensor in self.tensors)

    @property
    def size(self) -> int:
        return len(self.header) + self.data_size

    def tensor_offsets(self) -> list[int]:
        """Each tensor's start in the data section (data_offsets' begin)."""
        offsets, begin = [], 0
        for tensor in self.tensors:
            offsets.append(begin)
            begin += tensor.nbytes
        return offsets

    def iter_bytes(self) -> Iterator[bytes]:
        """The file as pieces of at most BLOCK_SIZE bytes, in constant memory."""
        yield self.header
        for tensor in self.tensors:
            for segment in tensor.segments:
                yield from _stream_range(self.seed, segment)

    def write(self, path: Path) -> None:
        with path.open("wb") as out:
            for piece in self.iter_bytes():
                out.write(piece)

    def to_bytes(self) -> bytes:
        """The whole file in memory: for tests and small sizes only."""
        return b"".join(self.iter_bytes())


@dataclass(frozen=True)
class Change:
    """A variant and its alignment with its predecessor (see the module docstring).

    ``new`` are (offset, length) ranges of ``file``; ``dropped`` of the predecessor.
    """

    file: WeightsFile
    new: tuple[tuple[int, int], ...]
    dropped: tuple[tuple[int, int], ...] = ()

    @property
    def changed_bytes(self) -> int:
        return sum(length for _, length in self.new)


def _stream_key(stream: str) -> int:
    """A stable integer for a stream name (``hash()`` is salted per process)."""
    return int.from_bytes(hashlib.sha256(stream.encode()).digest()[:8], "little")


@lru_cache(maxsize=4)
def _stream_block(seed: int, stream: str, index: int) -> bytes:
    words = np.random.PCG64([seed, _stream_key(stream), index]).random_raw(BLOCK_SIZE // 8)
    return words.astype("<u8", copy=False).tobytes()


def _stream_range(seed: int, segment: Segment) -> Iterator[bytes]:
    position, end = segment.offset, segment.offset + segment.length
    while position < end:
        index, start = divmod(position, BLOCK_SIZE)
        stop = min(BLOCK_SIZE, start + end - position)
        block = _stream_block(seed, segment.stream, index)
        yield block if (start, stop) == (0, BLOCK_SIZE) else block[start:stop]
        position += stop - start


def _rng(seed: int, generation: int, purpose: str) -> np.random.Generator:
    return np.random.default_rng([seed, generation, _stream_key(purpose)])


def _round_rows(nbytes: int) -> int:
    return max(ROW_BYTES, nbytes // ROW_BYTES * ROW_BYTES)


def _fresh_tensor(name: str, dtype: str, nbytes: int, generation: int) -> Tensor:
    """A tensor whose bytes are new in ``generation``."""
    return Tensor(name, dtype, (Segment(f"g{generation}:{name}", 0, nbytes),))


def tail_bytes(data_size: int) -> int:
    """The last tensor's size (lm_head): what ``tail_replaced`` rewrites in the base."""
    return _round_rows(min(TAIL_MAX_BYTES, data_size // 8))


def base(data_size: int, seed: int = 0) -> WeightsFile:
    """The base: ``data_size`` bytes of tensors (a multiple of 4 KiB, at least 4 MiB).

    Embeddings (1/16), layers of 4 KiB norms and 256 KiB-4 MiB projections, a final
    norm, and lm_head (``tail_bytes``) last. The file adds its header (a few KiB).
    """
    if data_size % ROW_BYTES or data_size < MIN_DATA_SIZE:
        raise ValueError(f"data_size must be a multiple of 4 KiB, at least 4 MiB: {data_size}")
    rng = _rng(seed, 1, "layout")
    tail = tail_bytes(data_size)
    embed = _round_rows(data_size // 16)
    final_norm = ROW_BYTES
    layers_room = data_size - embed - final_norm - tail
    tensors = [_fresh_tensor("model.embed_tokens.weight", "BF16", embed, 1)]
    layer = 0
    while layers_room > 0:
        norm = min(ROW_BYTES, layers_room)
        tensors.append(
            _fresh_tensor(f"model.layers.{layer}.input_layernorm.weight", "F32", norm, 1)
        )
        layers_room -= norm
        for projection in LAYER_PROJECTIONS:
            if layers_room == 0:
                break
            nbytes = min(int(rng.choice(LAYER_TENSOR_SIZES)), layers_room)
            name = f"model.layers.{layer}.{projection}.weight"
            tensors.append(_fresh_tensor(name, "BF16", nbytes, 1))
            layers_room -= nbytes
        layer += 1
    tensors.append(_fresh_tensor("model.norm.weight", "F32", final_norm, 1))
    tensors.append(_fresh_tensor("lm_head.weight", "BF16", tail, 1))
    return WeightsFile(seed=seed, generation=1, tensors=tuple(tensors))


def _header_alignment(
    previous: WeightsFile, variant: WeightsFile
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The header's new and dropped ranges: see the module docstring."""
    old, new = previous.header, variant.header
    new_ranges: list[tuple[int, int]] = []
    dropped_ranges: list[tuple[int, int]] = []
    differing = [i for i in range(8) if old[i] != new[i]]
    if differing:
        span = (differing[0], differing[-1] + 1 - differing[0])
        new_ranges.append(span)
        dropped_ranges.append(span)
    old_json, new_json = old[8:], new[8:]
    shorter = min(len(old_json), len(new_json))
    prefix = 0
    while prefix < shorter and old_json[prefix] == new_json[prefix]:
        prefix += 1
    suffix = 0
    while suffix < shorter - prefix and old_json[-1 - suffix] == new_json[-1 - suffix]:
        suffix += 1
    if len(new_json) - suffix > prefix:
        new_ranges.append((8 + prefix, len(new_json) - suffix - prefix))
    if len(old_json) - suffix > prefix:
        dropped_ranges.append((8 + prefix, len(old_json) - suffix - prefix))
    return new_ranges, dropped_ranges


def _change(
    previous: WeightsFile,
    tensors: list[Tensor],
    new_data: list[tuple[int, int]],
    dropped_data: list[tuple[int, int]],
    metadata: tuple[tuple[str, str], ...] | None = None,
) -> Change:
    """A Change from a data-section edit: adds the header's alignment, shifts to file offsets."""
    variant = replace(
        previous,
        generation=previous.generation + 1,
        tensors=tuple(tensors),
        metadata=previous.metadata if metadata is None else metadata,
    )
    new_header, dropped_header = _header_alignment(previous, variant)
    new_shift, old_shift = len(variant.header), len(previous.header)
    return Change(
        file=variant,
        new=tuple(new_header + [(new_shift + start, n) for start, n in new_data]),
        dropped=tuple(dropped_header + [(old_shift + start, n) for start, n in dropped_data]),
    )


def regions_rewritten(previous: WeightsFile) -> Change:
    """A few tensors (1-4 MiB each) retrained: same sizes, their bytes new."""
    generation = previous.generation + 1
    inner = range(1, len(previous.tensors) - 1)
    candidates = [
        i for i in inner if RETRAINED_MIN <= previous.tensors[i].nbytes <= RETRAINED_MAX
    ] or sorted(inner, key=lambda i: -previous.tensors[i].nbytes)
    picked = _rng(previous.seed, generation, "retrained").choice(
        candidates, size=min(RETRAINED_TENSORS, len(candidates)), replace=False
    )
    tensors = list(previous.tensors)
    offsets = previous.tensor_offsets()
    regions = []
    for i in sorted(int(i) for i in picked):
        old = tensors[i]
        tensors[i] = _fresh_tensor(old.name, old.dtype, old.nbytes, generation)
        regions.append((offsets[i], old.nbytes))
    return _change(previous, tensors, regions, regions)


def header_grown(previous: WeightsFile) -> Change:
    """A metadata key added at the front of the JSON: every byte after it shifts."""
    metadata = (("finetune_step", f"{previous.generation * 1200}"), *previous.metadata)
    return _change(previous, list(previous.tensors), [], [], metadata=metadata)


def _middle(previous: WeightsFile) -> int:
    """The index of the tensor covering the middle of the data section."""
    half = previous.data_size // 2
    offsets = previous.tensor_offsets()
    return max(i for i, offset in enumerate(offsets) if offset <= half)


def inserted_mid(previous: WeightsFile) -> Change:
    """A new 256 KiB tensor inserted before the tensor at the middle of the data."""
    generation = previous.generation + 1
    at = _middle(previous)
    offset = previous.tensor_offsets()[at]
    name = f"model.adapters.{generation}.weight"
    inserted = _fresh_tensor(name, "BF16", INSERTED_TENSOR_BYTES, generation)
    tensors = [*previous.tensors[:at], inserted, *previous.tensors[at:]]
    return _change(previous, tensors, [(offset, INSERTED_TENSOR_BYTES)], [])


def deleted_mid(previous: WeightsFile) -> Change:
    """A tensor at the middle of the data shrinks by 256 KiB of rows: a range removed."""
    offsets = previous.tensor_offsets()
    at = _middle(previous)
    while previous.tensors[at].nbytes <= DELETED_BYTES:
        at += 1
    old = previous.tensors[at]
    keep = old.nbytes - DELETED_BYTES
    segments, kept = [], 0
    for segment in old.segments:
        length = min(segment.length, keep - kept)
        if length > 0:
            segments.append(replace(segment, length=length))
            kept += length
    tensors = list(previous.tensors)
    tensors[at] = replace(old, segments=tuple(segments))
    return _change(previous, tensors, [], [(offsets[at] + keep, DELETED_BYTES)])


def tail_replaced(previous: WeightsFile) -> Change:
    """The last tensor retrained: its bytes, at the end of the file, new."""
    generation = previous.generation + 1
    old = previous.tensors[-1]
    tensors = [
        *previous.tensors[:-1],
        _fresh_tensor(old.name, old.dtype, old.nbytes, generation),
    ]
    region = (previous.data_size - old.nbytes, old.nbytes)
    return _change(previous, tensors, [region], [region])


def layer_appended(previous: WeightsFile) -> Change:
    """A new tensor (up to 2 MiB) appended after the last one."""
    generation = previous.generation + 1
    nbytes = _round_rows(min(APPENDED_MAX_BYTES, previous.data_size // 16))
    name = f"model.heads.{generation}.weight"
    tensors = [*previous.tensors, _fresh_tensor(name, "BF16", nbytes, generation)]
    return _change(previous, tensors, [(previous.data_size, nbytes)], [])


VARIANTS = {
    "regions_rewritten": regions_rewritten,
    "header_grown": header_grown,
    "inserted_mid": inserted_mid,
    "deleted_mid": deleted_mid,
    "tail_replaced": tail_replaced,
    "layer_appended": layer_appended,
}
"""Each single edit, by name: applied to the base, one variant each."""

FAMILY_STEPS = (
    "regions_rewritten",
    "header_grown",
    "layer_appended",
    "inserted_mid",
    "deleted_mid",
    "tail_replaced",
)
"""The chain of successive checkpoints after the base: v2 = v1 + the first edit, and so on."""


def family(data_size: int, seed: int = 0) -> list[Change]:
    """v1 (the base: all of it new) and each later version as a Change from the one before."""
    first = base(data_size, seed)
    versions = [Change(file=first, new=((0, first.size),))]
    for step in FAMILY_STEPS:
        versions.append(VARIANTS[step](versions[-1].file))
    return versions


def variants(data_size: int, seed: int = 0) -> dict[str, Change]:
    """Each single edit applied to the same base."""
    first = base(data_size, seed)
    return {name: make(first) for name, make in VARIANTS.items()}
