"""Chunk-size study for issue 13: which FastCDC parameters and chunk hash the chunk store uses.

Run from the repository root: ``.venv/bin/python bench/chunk_study.py [--size-mib 64]``.
It writes the fine-tune family of ``tests/finetune.py`` (the base, six successive
checkpoints, and each single edit of the base) under ``bench/out/chunk_study/``,
then measures, for every FastCDC configuration:

- that :class:`IncrementalChunker` (the chunker the registry will adopt, fed a body in
  pieces of any size) cuts exactly where ``cut_buf`` over the whole buffer does;
- dedup: bytes stored with chunk-level dedup against the bytes that really changed,
  and the saving against file-level dedup;
- index cost: chunks per GiB stored, index bytes as a share of the bytes stored;
- speed on this machine, in the same run: FastCDC alone and with BLAKE3 or sha256 per
  chunk, whole-file hashes, and whether work in two threads overlaps.

It prints Markdown and writes it to ``--out``; the data directory is removed at exit.
Speeds are medians over ``--repeats`` rounds, each round timing every method once
(round-robin, so a burst of load from elsewhere hits all methods alike).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import queue
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import blake3
import numpy as np
from pyfastcdc import FastCDC

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from tests import finetune  # noqa: E402
from tests.finetune import KiB, MiB  # noqa: E402

GiB = 1024 * MiB

AVERAGE_SIZES = (16 * KiB, 32 * KiB, 64 * KiB, 128 * KiB, 256 * KiB)
MIN_DIVISORS = (4, 2)
NORMALIZATION_LEVELS = (1, 2)
MAX_FACTOR = 4

RATIO_TARGET = 1.5
SAVING_TARGET = 0.5
INDEX_TARGET = 0.01
CHUNK_ROW_BYTES = (100, 150)
"""Index bytes per unique chunk: its 32-byte name, pack, offset, length, row overhead, and
its entry in the unique index on the name. Low and high estimate."""
FILE_ENTRY_BYTES = (16, 48)
"""Index bytes per entry of a file's chunk list: packed (chunk id and length) or one row
per (file, ordinal) with its primary-key entry. Low and high estimate."""

HASH_PIECE = MiB
"""Whole-file hashing feeds this much per update unless a row says otherwise."""
BODY_PIECE = 64 * KiB
"""A request body's pieces as an ASGI server delivers them (roughly)."""
SECTIONS = ("equivalence", "dedup", "speed", "pipelines")
CUT_BATCH = MiB
"""IncrementalChunker cuts once this much beyond max_size is buffered: bounds its memory
(max_size + 2 CUT_BATCH, or a bigger piece) and amortizes each pass. Measured: 256 KiB
and 4 MiB are 5-12% slower, 16 MiB (out of cache) half as fast."""


@dataclass(frozen=True)
class ChunkConfig:
    average: int
    minimum: int
    maximum: int
    normalization: int

    def chunker(self) -> FastCDC:
        return FastCDC(
            self.average,
            min_size=self.minimum,
            max_size=self.maximum,
            normalized_chunking=self.normalization,  # type: ignore[arg-type]
        )

    @property
    def label(self) -> str:
        return (
            f"{self.average // KiB}/{self.minimum // KiB}/{self.maximum // KiB} "
            f"NC{self.normalization}"
        )


CONFIGS = tuple(
    ChunkConfig(average, average // divisor, average * MAX_FACTOR, level)
    for average in AVERAGE_SIZES
    for divisor in MIN_DIVISORS
    for level in NORMALIZATION_LEVELS
)


# --------------------------------------------------------------------------- the chunker


class IncrementalChunker:
    """FastCDC over a body that arrives in pieces of any size, cutting exactly where
    ``cut_buf`` over the whole body would.

    FastCDC decides a chunk's end from at most ``max_size`` bytes after its start; only
    when fewer remain does the end of the data limit it. So a chunk whose start has
    ``max_size`` bytes after it is final; the tail waits for more data or ``finish``.
    Chunks are (offset in the body, bytes) with the bytes a view into one reused buffer,
    valid until the next ``push`` or ``finish`` (as with pyfastcdc's ``cut_stream``): a
    fresh buffer per pass costs page faults, and a batch of about 1 MiB keeps each
    piece in cache between its copy and its cut.
    """

    def __init__(self, cdc: FastCDC) -> None:
        self._cdc = cdc
        self._view = memoryview(bytearray(cdc.max_size + 2 * CUT_BATCH))
        self._start = 0  # the first byte not emitted yet
        self._fill = 0
        self._offset = 0  # the body offset of the buffer's first byte

    def push(self, piece: bytes | bytearray | memoryview) -> list[tuple[int, memoryview]]:
        self._make_room(len(piece))
        self._view[self._fill : self._fill + len(piece)] = piece
        self._fill += len(piece)
        if self._fill < self._cdc.max_size + CUT_BATCH:
            return []
        return self._cut(final=False)

    def finish(self) -> list[tuple[int, memoryview]]:
        self._make_room(0)
        return self._cut(final=True)

    def _make_room(self, incoming: int) -> None:
        """Moves the tail to the front (ending the last chunks' views); grows for a big piece."""
        tail = self._fill - self._start
        if self._start:
            self._view[:tail] = self._view[self._start : self._fill]
            self._offset += self._start
            self._start, self._fill = 0, tail
        if tail + incoming > len(self._view):
            grown = memoryview(bytearray(tail + incoming + CUT_BATCH))
            grown[:tail] = self._view[:tail]
            self._view = grown

    def _cut(self, final: bool) -> list[tuple[int, memoryview]]:
        emitted: list[tuple[int, memoryview]] = []
        for chunk in self._cdc.cut_buf(self._view[: self._fill]):
            if not final and self._fill - chunk.offset < self._cdc.max_size:
                break
            emitted.append((self._offset + chunk.offset, chunk.data))
            self._start = chunk.offset + chunk.length
        return emitted


def incremental_cuts(
    cdc: FastCDC, data: bytes, piece_sizes: Iterator[int]
) -> tuple[int, list[tuple[int, int]]]:
    """Pushes ``data`` in pieces; returns the pieces pushed and the (offset, length) cuts,
    after checking that the emitted bytes are the body's."""
    chunker = IncrementalChunker(cdc)
    cuts: list[tuple[int, int]] = []
    position = pieces = 0

    def collect(chunks: list[tuple[int, memoryview]]) -> None:
        for offset, chunk in chunks:
            if chunk != data[offset : offset + len(chunk)]:
                raise AssertionError(f"chunk at {offset} holds other bytes than the body")
            cuts.append((offset, len(chunk)))

    while position < len(data):
        size = next(piece_sizes)
        collect(chunker.push(data[position : position + size]))
        position += size
        pieces += 1
    collect(chunker.finish())
    return pieces, cuts


def log_uniform_sizes(rng: np.random.Generator, largest: int) -> Iterator[int]:
    """Piece sizes from 1 byte to ``largest``, every magnitude equally likely."""
    while True:
        yield int(np.exp(rng.uniform(0, np.log(largest + 1))))


def constant_sizes(size: int) -> Iterator[int]:
    while True:
        yield size


@dataclass(frozen=True)
class EquivalenceRow:
    config: ChunkConfig
    cases: int
    pieces: int
    chunks: int


def check_incremental(config: ChunkConfig, sample: bytes, seed: int) -> EquivalenceRow:
    """Every case must cut exactly as cut_buf does; raises AssertionError otherwise."""
    cdc = config.chunker()
    rng = np.random.default_rng(seed)
    near_limits = [
        0,
        1,
        config.minimum - 1,
        config.minimum,
        config.minimum + 1,
        config.average,
        config.maximum - 1,
        config.maximum,
        config.maximum + 1,
        2 * config.maximum + 3,
        config.maximum + CUT_BATCH,
        config.maximum + CUT_BATCH + 1,
    ]
    cases: list[tuple[bytes, Iterator[int]]] = [
        (sample, log_uniform_sizes(rng, 4 * MiB)),
        (sample, constant_sizes(BODY_PIECE)),
        (sample, constant_sizes(7 * KiB + 3)),
        (bytes(3 * MiB + 17), log_uniform_sizes(rng, MiB)),  # no content cuts: max-size chunks
    ]
    # Zeros cut into max-size chunks, so a first piece of m * max - 1, m * max or
    # m * max + 1 bytes leaves the last chunk start one byte short of, at, or past the
    # rule "max_size bytes after it": a chunker emitting a chunk one byte early fails here.
    whole_chunks = -(-(config.maximum + CUT_BATCH) // config.maximum)
    for delta in (-1, 0, 1):
        first = whole_chunks * config.maximum + delta
        cases.append(
            (
                bytes(first + 2 * config.maximum),
                itertools.chain([first], constant_sizes(BODY_PIECE)),
            )
        )
    for size in near_limits:
        data = rng.bytes(size)
        cases.append((data, log_uniform_sizes(rng, max(size, 1))))
        if size <= 64 * KiB:
            cases.append((data, constant_sizes(1)))
    pieces = chunks = 0
    for data, sizes in cases:
        pushed, cuts = incremental_cuts(cdc, data, sizes)
        expected = [(chunk.offset, chunk.length) for chunk in cdc.cut_buf(data)]
        if cuts != expected:
            pairs = zip(cuts, expected, strict=False)
            first = next((i for i, (got, want) in enumerate(pairs) if got != want), len(cuts))
            raise AssertionError(
                f"{config.label}: incremental cuts differ from cut_buf at chunk {first} "
                f"of a {len(data)}-byte body"
            )
        pieces += pushed
        chunks += len(cuts)
    return EquivalenceRow(config, len(cases), pieces, chunks)


# --------------------------------------------------------------------------- dedup


@dataclass(frozen=True)
class StudyFile:
    label: str
    path: Path
    size: int
    changed: int


@dataclass(frozen=True)
class Corpus:
    versions: list[StudyFile]
    """v1 (the base) to v7: each changed relative to the one before."""
    singles: list[StudyFile]
    """Each single edit of the base: changed relative to v1."""


def write_corpus(data_size: int, directory: Path) -> Corpus:
    directory.mkdir(parents=True, exist_ok=True)
    versions = []
    steps = ("base", *finetune.FAMILY_STEPS)
    for number, (step, change) in enumerate(zip(steps, finetune.family(data_size), strict=True), 1):
        path = directory / f"v{number}.safetensors"
        change.file.write(path)
        versions.append(
            StudyFile(f"v{number} {step}", path, change.file.size, change.changed_bytes)
        )
    singles = []
    for name, change in finetune.variants(data_size).items():
        path = directory / f"{name}.safetensors"
        change.file.write(path)
        singles.append(StudyFile(name, path, change.file.size, change.changed_bytes))
    return Corpus(versions, singles)


def chunk_names(cdc: FastCDC, path: Path) -> list[tuple[bytes, int]]:
    return [(blake3.blake3(chunk.data).digest(), chunk.length) for chunk in cdc.cut_file(path)]


@dataclass(frozen=True)
class DedupRow:
    config: ChunkConfig
    version_new: list[int]
    """Bytes each version adds to a store holding all versions before it."""
    single_new: list[int]
    """Bytes each single edit adds to a store holding the base."""
    unique_chunks: int
    references: int
    """Entries in all versions' chunk lists."""
    base_chunks: list[int]
    """The base's chunk lengths."""

    @property
    def stored(self) -> int:
        return sum(self.version_new)

    def index_share(self, estimate: int) -> float:
        index = (
            self.unique_chunks * CHUNK_ROW_BYTES[estimate]
            + self.references * FILE_ENTRY_BYTES[estimate]
        )
        return index / self.stored


def dedup_row(config: ChunkConfig, corpus: Corpus) -> DedupRow:
    cdc = config.chunker()
    seen: set[bytes] = set()
    version_new, references = [], 0
    base_names: set[bytes] = set()
    base_chunks: list[int] = []
    for number, version in enumerate(corpus.versions):
        names = chunk_names(cdc, version.path)
        references += len(names)
        new = 0
        for name, length in names:
            if name not in seen:
                seen.add(name)
                new += length
        version_new.append(new)
        if number == 0:
            base_names = {name for name, _ in names}
            base_chunks = [length for _, length in names]
    single_new = []
    for single in corpus.singles:
        fresh = {name: length for name, length in chunk_names(cdc, single.path)}
        single_new.append(sum(n for name, n in fresh.items() if name not in base_names))
    return DedupRow(config, version_new, single_new, len(seen), references, base_chunks)


# --------------------------------------------------------------------------- speed


def pieces_of(data: bytes, size: int) -> Iterator[memoryview]:
    view = memoryview(data)
    for start in range(0, len(view), size):
        yield view[start : start + size]


def hash_whole(data: bytes, new_hash: Callable[[], object], piece_size: int = HASH_PIECE) -> None:
    hasher = new_hash()
    for piece in pieces_of(data, piece_size):
        hasher.update(piece)  # type: ignore[attr-defined]
    hasher.digest()  # type: ignore[attr-defined]


def cut_only(cdc: FastCDC, data: bytes) -> None:
    for _ in cdc.cut_buf(data):
        pass


def cut_and_name(cdc: FastCDC, data: bytes, name: Callable[[memoryview], object]) -> None:
    for chunk in cdc.cut_buf(data):
        name(chunk.data)


def blake3_name(chunk: memoryview) -> bytes:
    return blake3.blake3(chunk).digest()


def sha256_name(chunk: memoryview) -> bytes:
    return hashlib.sha256(chunk).digest()


def cut_then_name_in_another_thread(
    cdc: FastCDC, data: bytes, name: Callable[[memoryview], object]
) -> None:
    """The cutter hands batches of chunks (about 4 MiB) to a hashing thread."""
    batches: queue.Queue[list[memoryview] | None] = queue.Queue(maxsize=4)

    def hash_batches() -> None:
        while (batch := batches.get()) is not None:
            for chunk in batch:
                name(chunk)

    hasher = threading.Thread(target=hash_batches)
    hasher.start()
    batch: list[memoryview] = []
    batched = 0
    for chunk in cdc.cut_buf(data):
        batch.append(chunk.data)
        batched += chunk.length
        if batched >= 4 * MiB:
            batches.put(batch)
            batch, batched = [], 0
    batches.put(batch)
    batches.put(None)
    hasher.join()


def ingest_chunks(
    cdc: FastCDC, data: bytes, name: Callable[[memoryview], object], piece: int = BODY_PIECE
) -> None:
    """The chunking half of an ingest: the body in pieces, cut, and each chunk named."""
    chunker = IncrementalChunker(cdc)
    for body_piece in pieces_of(data, piece):
        for _, chunk in chunker.push(body_piece):
            name(chunk)
    for _, chunk in chunker.finish():
        name(chunk)


def ingest_one_thread(cdc: FastCDC, data: bytes, name: Callable[[memoryview], object]) -> None:
    """A whole ingest in one thread: the file's sha256 (its identity) and its named chunks."""
    file_hash = hashlib.sha256()
    chunker = IncrementalChunker(cdc)
    for piece in pieces_of(data, BODY_PIECE):
        file_hash.update(piece)
        for _, chunk in chunker.push(piece):
            name(chunk)
    for _, chunk in chunker.finish():
        name(chunk)
    file_hash.digest()


def ingest_two_threads(
    cdc: FastCDC,
    data: bytes,
    name: Callable[[memoryview], object],
    hash_piece: int,
    chunk_piece: int,
) -> None:
    """The file's sha256 in one thread (updates of ``hash_piece``), chunking and naming in
    another (fed ``chunk_piece`` at a time)."""
    chunking = threading.Thread(target=ingest_chunks, args=(cdc, data, name, chunk_piece))
    chunking.start()
    hash_whole(data, hashlib.sha256, hash_piece)
    chunking.join()


def hash_twice_in_two_threads(data: bytes) -> None:
    """The control for every two-thread row: how much of a second core the run could get."""
    other = threading.Thread(target=hash_whole, args=(data, hashlib.sha256))
    other.start()
    hash_whole(data, hashlib.sha256)
    other.join()


def reassemble(data: bytes, cuts: list[tuple[int, int]], target: memoryview) -> None:
    """A pull's per-chunk work at its cheapest: copy each chunk from a pack to the output."""
    source = memoryview(data)
    for offset, length in cuts:
        target[offset : offset + length] = source[offset : offset + length]


@dataclass
class SpeedRow:
    method: str
    config: ChunkConfig | None
    run: Callable[[], None]
    volume: int
    """Bytes one run processes."""
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)

    def wall_rates(self) -> list[float]:
        return [self.volume / MiB / wall for wall in self.walls]

    def cpu_rates(self) -> list[float]:
        return [self.volume / MiB / cpu for cpu in self.cpus]


def single_thread_rows(data: bytes) -> list[SpeedRow]:
    """Whole-file hashes, and per configuration: cutting, naming, reassembling."""
    target = memoryview(bytearray(len(data)))
    rows = [
        SpeedRow("sha256, whole file", None, lambda: hash_whole(data, hashlib.sha256), len(data)),
        SpeedRow("BLAKE3, whole file", None, lambda: hash_whole(data, blake3.blake3), len(data)),
    ]
    for config in CONFIGS:
        cdc = config.chunker()
        cuts = [(chunk.offset, chunk.length) for chunk in cdc.cut_buf(data)]
        runs: dict[str, Callable[[], None]] = {
            "FastCDC alone": lambda cdc=cdc: cut_only(cdc, data),
            "FastCDC + BLAKE3 per chunk": lambda cdc=cdc: cut_and_name(cdc, data, blake3_name),
            "FastCDC + sha256 per chunk": lambda cdc=cdc: cut_and_name(cdc, data, sha256_name),
            "reassemble: copy chunk by chunk": lambda cuts=cuts: reassemble(data, cuts, target),
        }
        rows += [SpeedRow(method, config, run, len(data)) for method, run in runs.items()]
    return rows


def pipeline_rows(data: bytes, configs: list[ChunkConfig]) -> list[SpeedRow]:
    """The streaming chunker, and cutting and hashing spread over two threads, with a control."""
    rows = [
        SpeedRow(
            "control: sha256 of the file in each of 2 threads",
            None,
            lambda: hash_twice_in_two_threads(data),
            2 * len(data),
        )
    ]
    for config in configs:
        cdc = config.chunker()
        runs: dict[str, Callable[[], None]] = {
            f"incremental FastCDC alone, {BODY_PIECE // KiB} KiB pieces": lambda cdc=cdc: (
                ingest_chunks(cdc, data, len)
            ),
        }
        for hash_name, name in (("BLAKE3", blake3_name), ("sha256", sha256_name)):
            runs |= {
                f"FastCDC, {hash_name} in another thread": lambda cdc=cdc, name=name: (
                    cut_then_name_in_another_thread(cdc, data, name)
                ),
                f"ingest: file sha256 + incremental FastCDC + {hash_name}, 1 thread": (
                    lambda cdc=cdc, name=name: ingest_one_thread(cdc, data, name)
                ),
                f"ingest: file sha256 ∥ incremental FastCDC + {hash_name}, 2 threads, "
                "64 KiB pieces to both": (
                    lambda cdc=cdc, name=name: ingest_two_threads(
                        cdc, data, name, BODY_PIECE, BODY_PIECE
                    )
                ),
                f"ingest: file sha256 ∥ incremental FastCDC + {hash_name}, 2 threads, "
                "4 MiB to sha256, 1 MiB to the chunker": (
                    lambda cdc=cdc, name=name: ingest_two_threads(cdc, data, name, 4 * MiB, MiB)
                ),
            }
        rows += [SpeedRow(method, config, run, len(data)) for method, run in runs.items()]
    return rows


def measure(rows: list[SpeedRow], repeats: int) -> None:
    for _ in range(repeats):
        for row in rows:
            cpu, wall = time.process_time(), time.perf_counter()
            row.run()
            row.walls.append(time.perf_counter() - wall)
            row.cpus.append(time.process_time() - cpu)


# --------------------------------------------------------------------------- report


def kib(n: float) -> str:
    return f"{n / KiB:,.0f} KiB"


def mib(n: float) -> str:
    return f"{n / MiB:,.1f} MiB"


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def spread(values: list[float]) -> float:
    """(max - min) / median: how far apart the repeats were."""
    return (max(values) - min(values)) / statistics.median(values)


def load() -> str:
    """Load average and, where the kernel has it, CPU pressure (share of time some task waited)."""
    one, five, _ = os.getloadavg()
    text = f"load {one:.2f} (1 min), {five:.2f} (5 min)"
    pressure = Path("/proc/pressure/cpu")
    if pressure.exists():
        some = pressure.read_text().split()[1].removeprefix("avg10=")
        text += f", CPU pressure {some}% (10 s)"
    return text


def report_equivalence(rows: list[EquivalenceRow]) -> list[str]:
    lines = [
        "## IncrementalChunker against cut_buf",
        "",
        "Each configuration: 24 MiB of a family file (random piece sizes from 1 byte to "
        "4 MiB, 64 KiB pieces, 7 KiB + 3 pieces); zeros (no content-defined cut: "
        "max-size chunks), in random pieces and with a first piece that leaves a chunk "
        "start 1 byte short of, at, and past max_size before the end of the buffer; and "
        "random bodies of every size near min, average, max and the cutting batch "
        "(random pieces, and 1-byte pieces up to 64 KiB). Every emitted chunk's bytes "
        "are compared with the body's too.",
        "",
        "| config (avg/min/max KiB) | cases | pieces pushed | chunks | boundaries |",
        "|---|---:|---:|---:|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.config.label} | {row.cases} | {row.pieces:,} | {row.chunks:,} | identical |"
        )
    return lines


def report_dedup(rows: list[DedupRow], corpus: Corpus) -> list[str]:
    versions, singles = corpus.versions, corpus.singles
    ideal = sum(v.changed for v in versions)
    file_level = sum(v.size for v in versions)
    later_changed = sum(v.changed for v in versions[1:])
    lines = [
        "## Dedup on the fine-tune family",
        "",
        "Family (each version against the one before):",
        "",
        "| version | size | really changed |",
        "|---|---:|---:|",
        *[f"| {v.label} | {mib(v.size)} | {v.changed:,} B |" for v in versions],
        "",
        f"All versions: {mib(file_level)} with file-level dedup (every version differs); "
        f"the base plus what really changed is {mib(ideal)}.",
        "",
        "`stored` is the bytes of unique chunks over all versions; `/ideal` divides it by "
        "the base plus the changed bytes; `later / changed` is what v2..v7 stored over "
        f"what they changed ({mib(later_changed)}); `saving` is against file-level dedup. "
        "`mean` is the base's mean chunk length; `at max` the share of its chunks cut at "
        "max_size. Index: unique chunks × "
        f"{CHUNK_ROW_BYTES[0]}-{CHUNK_ROW_BYTES[1]} B plus chunk-list entries × "
        f"{FILE_ENTRY_BYTES[0]}-{FILE_ENTRY_BYTES[1]} B, as a share of `stored`.",
        "",
        f"`targets`: later / changed ≤ {RATIO_TARGET}, saving ≥ {pct(SAVING_TARGET)}, index "
        f"(high estimate) ≤ {pct(INDEX_TARGET)}; a miss is named.",
        "",
        "| config (avg/min/max KiB) | mean | at max | stored | /ideal | later / changed "
        "| saving | chunks per GiB stored | index (low-high) | targets |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        base_lengths = row.base_chunks
        at_max = sum(n == row.config.maximum for n in base_lengths) / len(base_lengths)
        later = sum(row.version_new[1:])
        misses = [
            name
            for name, met in (
                ("ratio", later / later_changed <= RATIO_TARGET),
                ("saving", 1 - row.stored / file_level >= SAVING_TARGET),
                ("index", row.index_share(1) <= INDEX_TARGET),
            )
            if not met
        ]
        lines.append(
            f"| {row.config.label} | {kib(statistics.mean(base_lengths))} | {pct(at_max)} "
            f"| {mib(row.stored)} | {row.stored / ideal:.3f} | {later / later_changed:.2f} "
            f"| {pct(1 - row.stored / file_level)} "
            f"| {row.unique_chunks / (row.stored / GiB):,.0f} "
            f"| {pct(row.index_share(0))}-{pct(row.index_share(1))} "
            f"| {'missed: ' + ', '.join(misses) if misses else 'met'} |"
        )
    lines += [
        "",
        "Per version: bytes stored anew / bytes really changed, and the excess "
        "(stored - changed). A change of a few bytes still stores whole chunks, so its "
        "ratio is large by construction: read the excess there.",
        "",
        "| config | " + " | ".join(v.label for v in versions[1:]) + " |",
        "|---|" + "---:|" * (len(versions) - 1),
    ]
    for row in rows:
        cells = [
            f"{new / v.changed:.2f} (+{kib(new - v.changed)})"
            for new, v in zip(row.version_new[1:], versions[1:], strict=True)
        ]
        lines.append(f"| {row.config.label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Each single edit of the base, against the base: stored / changed (+excess).",
        "",
        "| config | " + " | ".join(s.label for s in singles) + " |",
        "|---|" + "---:|" * len(singles),
    ]
    for row in rows:
        cells = [
            f"{new / s.changed:.2f} (+{kib(new - s.changed)})"
            for new, s in zip(row.single_new, singles, strict=True)
        ]
        lines.append(f"| {row.config.label} | " + " | ".join(cells) + " |")
    return lines


def report_speed(rows: list[SpeedRow], repeats: int, loads: tuple[str, str]) -> list[str]:
    wall_spreads = [spread(row.wall_rates()) for row in rows]
    cpu_spreads = [spread(row.cpu_rates()) for row in rows]
    lines = [
        "## Speed",
        "",
        f"The base file in memory; {repeats} rounds, each timing every row once "
        "(round-robin). `wall` is MiB/s by the clock (median and best round); `per CPU-s` "
        "is MiB per CPU-second of the process (median): for one thread, the speed of a "
        "core of its own, far less disturbed by other work on the machine. `spread` is "
        "(max - min) / median over the rounds. `CPU/wall` (highest round) above 1 means "
        "two threads ran at once; the control row shows how much of a second core the "
        "machine gave. Ingest rows hash the whole file with sha256 (its identity) and "
        "feed IncrementalChunker 64 KiB pieces, as a request body arrives, unless they "
        "say otherwise.",
        "",
        f"Before: {loads[0]}; after: {loads[1]}. Spread over all rows: wall median "
        f"{pct(statistics.median(wall_spreads))} (worst {pct(max(wall_spreads))}), "
        f"per CPU-s median {pct(statistics.median(cpu_spreads))} "
        f"(worst {pct(max(cpu_spreads))}).",
        "",
        "| method | config (avg/min/max KiB) | wall MiB/s | best | per CPU-s "
        "| spread wall / CPU | CPU/wall |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row, wall_spread, cpu_spread in zip(rows, wall_spreads, cpu_spreads, strict=True):
        cpu_share = max(c / w for c, w in zip(row.cpus, row.walls, strict=True))
        lines.append(
            f"| {row.method} | {row.config.label if row.config else '-'} "
            f"| {statistics.median(row.wall_rates()):,.0f} | {max(row.wall_rates()):,.0f} "
            f"| {statistics.median(row.cpu_rates()):,.0f} "
            f"| {pct(wall_spread)} / {pct(cpu_spread)} | {cpu_share:.2f} |"
        )
    return lines


def parse_config(text: str) -> ChunkConfig:
    """``avg/min/max/nc`` in KiB (NC a plain number), e.g. ``64/16/256/1``."""
    average, minimum, maximum, level = (int(part) for part in text.split("/"))
    return ChunkConfig(average * KiB, minimum * KiB, maximum * KiB, level)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=64, help="the base's tensor data, MiB")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of speed measurements")
    parser.add_argument(
        "--pipeline",
        type=parse_config,
        nargs="*",
        default=[parse_config(c) for c in ("64/16/256/1", "64/32/256/1", "128/32/512/1")],
        help="configs (avg/min/max/nc, KiB) whose threaded pipelines are timed",
    )
    parser.add_argument(
        "--sections",
        nargs="+",
        choices=SECTIONS,
        default=list(SECTIONS),
        help="what to measure (default: everything); e.g. rerun pipelines when the machine is quiet",
    )
    parser.add_argument("--out", type=Path, help="the Markdown report (default bench/out/...)")
    args = parser.parse_args()
    out = args.out or REPO_ROOT / "bench" / "out" / f"chunk_study_{args.size_mib}mib.md"
    directory = REPO_ROOT / "bench" / "out" / "chunk_study"
    lines = [
        f"# Chunk study: {args.size_mib} MiB base",
        "",
        f"{os.cpu_count()} CPUs; Python {sys.version.split()[0]}; numpy {np.__version__}; "
        f"blake3 {blake3.__version__}; pyfastcdc {__import__('pyfastcdc').__version__}.",
        "",
    ]
    try:
        started = time.perf_counter()
        corpus = write_corpus(args.size_mib * MiB, directory)
        print(f"corpus written in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        if "equivalence" in args.sections:
            sample = corpus.versions[2].path.read_bytes()[: 24 * MiB]
            equivalence = [check_incremental(c, sample, seed=i) for i, c in enumerate(CONFIGS)]
            lines += [*report_equivalence(equivalence), ""]
        if "dedup" in args.sections:
            lines += [*report_dedup([dedup_row(c, corpus) for c in CONFIGS], corpus), ""]
        data = corpus.versions[0].path.read_bytes()
        rows = []
        if "speed" in args.sections:
            rows += single_thread_rows(data)
        if "pipelines" in args.sections:
            rows += pipeline_rows(data, args.pipeline)
        if rows:
            before = load()
            measure(rows, args.repeats)
            lines += report_speed(rows, args.repeats, (before, load()))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    text = "\n".join(lines) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
