"""Verified reads of chunked files: no chunk's bytes leave the registry unchecked.

A range of a chunked file is read as whole chunks (the pack's chunk table, from
the index, says where each starts), each chunk's BLAKE3 is checked against its
name, and only then is the asked-for part of it handed on. Chunks are read in
groups of about a MiB, each checked on one of two verify threads while the next
are read, so checking costs one BLAKE3 pass over the bytes on both cores and no
extra round trip. From a local store (``parallel_pack_reads``) the verify
threads read their groups too (``read_pack``: one pread each); from S3 the
groups come in turn from one ``iter_pack_ranges`` stream, which reads ahead.

A chunk whose bytes do not hash to its name, or a pack gone from the store,
is recorded as damaged (``damage.record_damage``: logs, ``/metrics``, the index)
and the read ends with ``StorageUnavailable`` before that chunk's first byte:
a response that already started is then cut short (its Content-Length is never
met), one that did not is a 503. Wrong bytes are never sent.

Chunk tables are immutable (a pack is never rewritten in place, and its name is
never reused), so they are kept in a bounded in-process cache.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import accumulate

from sqlalchemy import select

from registry.blobstore.errors import PackNotFound
from registry.carton.streams import MiB
from registry.chunking import chunk_hash
from registry.db.queries import in_chunks
from registry.db.tables import Pack
from registry.errors import StorageUnavailable
from registry.services.chunkstore.damage import CORRUPT, MISSING, record_damage
from registry.services.chunkstore.layout import parse_pack_table
from registry.services.chunkstore.reader import StoredFile
from registry.services.context import RegistryContext

GROUP_BYTES = MiB
"""Whole chunks read and checked at a time (at least one chunk)."""
HASH_THREADS = 2
"""Threads (per process) that check groups (and read them, from a local store)."""
READ_AHEAD = 2
"""Groups read and checked ahead of the one handed on: reading, hashing and sending
overlap on both cores (about 3 MiB held per read)."""
TABLES_CACHED = 64
"""Pack chunk tables kept in memory per process: a 64 MiB pack's is about 1,000 entries,
~128 KiB parsed, so 64 of them (4 GiB of chunks) hold ~8 MiB. With 4,096 a worker's
memory grew with every pack it read, to 512 MiB (issue 27: a 16 GiB pull's worker held
46 MiB more than a 2 GiB pull's); a table read again costs one query and a parse."""


@dataclass(frozen=True)
class PackTable:
    """A pack's chunks: BLAKE3 names, and where each starts (one more: the end)."""

    hashes: tuple[str, ...]
    starts: tuple[int, ...]


class _Tables:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tables: OrderedDict[str, PackTable] = OrderedDict()

    def get(self, ctx: RegistryContext, names: Iterable[str]) -> dict[str, PackTable]:
        wanted = set(names)
        found: dict[str, PackTable] = {}
        with self._lock:
            for name in wanted:
                table = self._tables.get(name)
                if table is not None:
                    self._tables.move_to_end(name)
                    found[name] = table
        todo = sorted(wanted - found.keys())
        if todo:
            with ctx.sessions() as session:
                for batch in in_chunks(todo):
                    for name, raw in session.execute(
                        select(Pack.name, Pack.chunk_table).where(Pack.name.in_(batch))
                    ):
                        entries = parse_pack_table(bytes(raw))
                        found[name] = PackTable(
                            tuple(h for h, _ in entries),
                            tuple(accumulate((n for _, n in entries), initial=0)),
                        )
                session.rollback()
            with self._lock:
                for name in todo:
                    if name in found:
                        self._tables[name] = found[name]
                while len(self._tables) > TABLES_CACHED:
                    self._tables.popitem(last=False)
        return found


TABLES = _Tables()


@dataclass(frozen=True)
class _Group:
    pack: str
    start: int  # pack offset of the first whole chunk
    end: int  # pack offset past the last whole chunk
    first: int  # index of the first chunk
    keep_lo: int  # the part handed on, as pack offsets
    keep_hi: int


def _groups(
    ranges: list[tuple[str, int, int]], tables: dict[str, PackTable], target: int
) -> list[_Group]:
    groups: list[_Group] = []
    for pack, lo, hi in ranges:
        table = tables.get(pack)
        if table is None:  # the pack's row is gone: GC took it since the file was loaded
            raise PackNotFound(pack)
        starts = table.starts
        i = bisect_right(starts, lo) - 1
        end_idx = bisect_left(starts, hi)
        if i < 0 or end_idx >= len(starts) or starts[end_idx] < hi:
            raise PackNotFound(pack)  # the segment runs past the pack's chunks
        while i < end_idx:
            j = i + 1
            while j < end_idx and starts[j + 1] - starts[i] <= target:
                j += 1
            groups.append(
                _Group(pack, starts[i], starts[j], i, max(lo, starts[i]), min(hi, starts[j]))
            )
            i = j
    return groups


_Check = tuple[_Group, "Future[tuple[bytes, int | None]] | None"]
"""A group and its check under way (None: its pack is gone)."""


def iter_verified(
    ctx: RegistryContext, stored: StoredFile, start: int, stop: int, found_by: str = "read"
) -> Iterator[bytes]:
    """The chunked file's bytes ``[start, stop)``, every chunk checked first (module doc).

    ``found_by`` names the reader in the damage it records (``read``, ``scrub``).
    """
    ranges = stored.pack_ranges(start, stop)
    if not ranges:
        return
    tables = TABLES.get(ctx, {pack for pack, _, _ in ranges})
    try:
        groups = _groups(ranges, tables, GROUP_BYTES)
    except PackNotFound as exc:
        raise DamagedRead(stored, exc.name, None, "its chunk table is gone") from None
    checks: Iterator[_Check]
    if ctx.blobs.parallel_pack_reads:
        checks = ((g, _HASHERS.submit(_read_checked, ctx, g, tables[g.pack])) for g in groups)
    else:
        checks = _checks_in_turn(ctx, groups, tables)
    yield from _in_order(ctx, stored, checks, found_by)


def _in_order(
    ctx: RegistryContext, stored: StoredFile, checks: Iterator[_Check], found_by: str
) -> Iterator[bytes]:
    """Each group's kept part in turn, with ``READ_AHEAD`` groups read and hashed ahead
    of it; the first damage met (a chunk that does not hash to its name, a pack gone)
    ends the read before any byte of that chunk or pack."""
    window: deque[_Check] = deque()
    try:
        for check in checks:
            window.append(check)
            if len(window) > READ_AHEAD:
                yield _kept(ctx, stored, *window.popleft(), found_by)
        while window:
            yield _kept(ctx, stored, *window.popleft(), found_by)
    finally:
        for _, future in window:
            if future is not None:
                future.cancel()
        close = getattr(checks, "close", None)
        if close is not None:
            close()


def _kept(
    ctx: RegistryContext,
    stored: StoredFile,
    group: _Group,
    future: Future[tuple[bytes, int | None]] | None,
    found_by: str,
) -> bytes:
    """The group's kept part, once each of its chunks hashed to its name."""
    try:
        if future is None:
            raise PackNotFound(group.pack)
        data, bad = future.result()
    except PackNotFound:
        record_damage(ctx, group.pack, None, MISSING, found_by)
        raise DamagedRead(stored, group.pack, None, "the pack is missing") from None
    if bad is not None:
        record_damage(ctx, group.pack, [bad], CORRUPT, found_by)
        raise DamagedRead(stored, group.pack, bad, f"chunk {bad} does not hash to its name")
    lo, hi = group.keep_lo - group.start, group.keep_hi - group.start
    if lo == 0 and hi == len(data):
        return data
    return bytes(memoryview(data)[lo:hi])


def _checks_in_turn(
    ctx: RegistryContext, groups: list[_Group], tables: dict[str, PackTable]
) -> Iterator[_Check]:
    """Each group read from one ``iter_pack_ranges`` stream, then checked on a verify
    thread (where a pack is gone or short: None, then the end)."""
    piece = GROUP_BYTES + ctx.chunk_params.max_size
    stream = ctx.blobs.iter_pack_ranges(((g.pack, g.start, g.end) for g in groups), piece)
    try:
        pending = b""
        for group in groups:
            need = group.end - group.start
            parts: list[bytes] = [pending] if pending else []
            have = len(pending)
            try:
                while have < need:
                    data = next(stream)
                    parts.append(data)
                    have += len(data)
            except (PackNotFound, StopIteration):
                yield group, None
                return
            data = parts[0] if len(parts) == 1 else b"".join(parts)
            if have > need:  # the store's pieces straddle groups (rare): copy once
                data, pending = data[:need], data[need:]
            else:
                pending = b""
            yield group, _HASHERS.submit(_checked, group, tables[group.pack], data)
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()


def _read_checked(
    ctx: RegistryContext, group: _Group, table: PackTable
) -> tuple[bytes, int | None]:
    """A group read from a local pack and checked, on a verify thread."""
    data = ctx.blobs.read_pack(group.pack, group.start, group.end)
    if len(data) != group.end - group.start:
        raise PackNotFound(group.pack)  # the pack lost its end
    return _checked(group, table, data)


def _checked(group: _Group, table: PackTable, data: bytes) -> tuple[bytes, int | None]:
    """The group's bytes, and the index of its first chunk that does not hash to its name
    (None: all do)."""
    starts, hashes, base = table.starts, table.hashes, group.start
    view = memoryview(data)
    for i in range(group.first, bisect_left(starts, group.end, lo=group.first)):
        if chunk_hash(view[starts[i] - base : starts[i + 1] - base]) != hashes[i]:
            return data, i
    return data, None


_HASHERS = ThreadPoolExecutor(HASH_THREADS, thread_name_prefix="verify")


class DamagedRead(StorageUnavailable):
    """A read met damage: chunk ``idx`` of ``pack`` (None: the whole pack is gone)."""

    def __init__(self, stored: StoredFile, pack: str, idx: int | None, why: str) -> None:
        super().__init__(
            f"blob {stored.sha256} is damaged in the store: pack {pack}: {why} "
            "(recorded; a push of the same bytes heals it, run fsck for the full picture)"
        )
        self.pack, self.idx = pack, idx
