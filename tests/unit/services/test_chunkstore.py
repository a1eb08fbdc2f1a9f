"""The chunk store on the memory blob store + SQLite: files in, the same bytes out, deduplicated."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import threading
import time
from concurrent.futures import CancelledError, Future
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from registry.db.tables import Blob, BlobSegment, Chunk, DamagedChunk, Pack
from registry.services.chunkstore import packing
from registry.services.chunkstore.damage import CORRUPT, record_damage
from registry.services.chunkstore.files import (
    HANDOFF_BYTES,
    LOOKUP_BATCH_BYTES,
    PIECES_IN_FLIGHT,
    FileWriter,
)
from registry.services.chunkstore.index import record_files
from registry.services.chunkstore.layout import FileLayout
from registry.services.chunkstore.reader import iter_file, load_file, read_file
from registry.services.chunkstore.writer import PackSession
from registry.services.context import RegistryContext
from registry.services.leases import Lease
from registry.settings import Settings

MiB = 1024 * 1024


def write_files(ctx: RegistryContext, files: list[bytes], piece: int = 300_000) -> list[FileLayout]:
    """Each file through one push's pack session, fed in pieces, then indexed."""
    return push_files(ctx, files, piece)[1]


def push_files(
    ctx: RegistryContext, files: list[bytes], piece: int = 300_000
) -> tuple[PackSession, list[FileLayout]]:
    """``write_files``, with the push's pack session (what it still holds afterwards)."""
    with Lease(ctx.sessions, ctx.settings.lease_timeout) as lease:
        packs = PackSession(ctx, lease)
        layouts = []
        for data in files:
            writer = FileWriter(packs)
            for at in range(0, len(data), piece):
                writer.write(data[at : at + piece])
            layouts.append(writer.close())
        packs.finish()
        with ctx.transaction() as session:
            lease.fence(session)
            record_files(session, layouts, packs.pack_ids(session))
            lease.release(session)
    return packs, layouts


def stored_bytes(ctx: RegistryContext) -> int:
    with ctx.sessions() as s:
        return int(s.scalar(select(func.coalesce(func.sum(Pack.size), 0))) or 0)


def read_back(ctx: RegistryContext, sha256: str, start: int = 0, end: int | None = None) -> bytes:
    with ctx.sessions() as s:
        stored = load_file(s, sha256)
    assert stored is not None
    return read_file(ctx.blobs, stored, start, end)


def test_a_large_file_is_chunked_and_reads_back(ctx: RegistryContext) -> None:
    data = os.urandom(5 * MiB + 123)
    (layout,) = write_files(ctx, [data])
    assert layout.sha256 == hashlib.sha256(data).hexdigest()
    assert layout.chunked and layout.segments is not None
    assert len(layout.segments) == 1  # a fresh file: one run of chunks in one pack
    assert read_back(ctx, layout.sha256) == data
    with ctx.sessions() as s:
        assert s.scalar(select(Blob.chunked).where(Blob.sha256 == layout.sha256)) is True
        chunks = s.scalar(select(func.count()).select_from(Chunk))
    assert 5 * MiB // ctx.chunk_params.max_size <= chunks <= 5 * MiB // ctx.chunk_params.min_size


def test_small_files_stay_whole(ctx: RegistryContext) -> None:
    (layout,) = write_files(ctx, [b"tiny" * 100])
    assert not layout.chunked
    assert ctx.blobs.read_bytes(layout.sha256) == b"tiny" * 100


def test_a_variant_stores_only_what_changed(ctx: RegistryContext) -> None:
    base = bytearray(os.urandom(8 * MiB))
    write_files(ctx, [bytes(base)])
    before = stored_bytes(ctx)
    variant = base[: 3 * MiB] + os.urandom(512 * 1024) + base[3 * MiB + 100 :]  # shifted tail
    (layout,) = write_files(ctx, [bytes(variant)])
    added = stored_bytes(ctx) - before
    assert 512 * 1024 <= added <= 512 * 1024 + 4 * ctx.chunk_params.max_size
    assert layout.new_chunk_bytes == added
    assert read_back(ctx, layout.sha256) == bytes(variant)
    assert layout.segments is not None and len(layout.segments) >= 3  # base, new, base


def test_the_same_file_twice_adds_nothing(ctx: RegistryContext) -> None:
    data = os.urandom(2 * MiB)
    write_files(ctx, [data])
    before = stored_bytes(ctx)
    (again,) = write_files(ctx, [data])
    assert stored_bytes(ctx) == before and again.new_chunk_bytes == 0
    with ctx.sessions() as s:
        assert s.scalar(select(func.count()).select_from(Blob)) == 1
        segments = s.scalar(select(func.count()).select_from(BlobSegment))
    assert segments == 1


def test_identical_chunks_within_one_push_are_stored_once(ctx: RegistryContext) -> None:
    block = os.urandom(3 * MiB)
    layouts = write_files(ctx, [block + b"a", block + b"b"])
    assert layouts[1].new_chunk_bytes < ctx.chunk_params.max_size * 2
    assert read_back(ctx, layouts[1].sha256) == block + b"b"


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    cuts=st.lists(st.tuples(st.integers(0, 3 * MiB), st.integers(0, 3 * MiB)), max_size=6),
)
def test_any_range_reads_what_the_file_holds(ctx: RegistryContext, seed: int, cuts) -> None:
    rng = random.Random(seed)
    shared = rng.randbytes(MiB)
    data = rng.randbytes(rng.randint(70_000, MiB)) + shared + rng.randbytes(rng.randint(0, MiB))
    (layout,) = write_files(ctx, [data], piece=rng.randint(1, 400_000))
    with ctx.sessions() as s:
        stored = load_file(s, layout.sha256)
    assert stored is not None and stored.size == len(data)
    for a, b in cuts:
        start, end = min(a, b), max(a, b)
        assert b"".join(iter_file(ctx.blobs, stored, start, end, 65_537)) == data[start:end]
    assert read_file(ctx.blobs, stored, len(data) + 5) == b""


def test_a_file_closing_while_its_session_is_discarded_does_not_hang(
    ctx: RegistryContext,
) -> None:
    """A push that fails discards its session while a member's last chunks still wait for
    the placing thread: the member's layout fails (cancelled) instead of never coming."""
    release = threading.Event()
    with Lease(ctx.sessions, ctx.settings.lease_timeout) as lease:
        packs = PackSession(ctx, lease)
        busy = packs.placer().submit(release.wait, 10)  # the placing thread is held up
        writer = FileWriter(packs)
        writer.write(os.urandom(3 * MiB))
        layout = writer.close_later()
        discarding = threading.Thread(target=packs.discard)
        discarding.start()
        time.sleep(0.2)  # the discard drops the tasks queued behind the held-up one
        release.set()
        discarding.join(10)
        assert not discarding.is_alive() and busy.result() is True
        with pytest.raises(CancelledError):
            layout.result(timeout=5)


def test_a_placing_thread_started_while_the_session_stops_is_stopped_too(
    ctx: RegistryContext,
) -> None:
    """The chunking thread starts the placing thread on its first batch: a batch it hands
    over while the session is being discarded (its last task still running) is placed or
    dropped before the discard goes on to abort the pack and drop the claims, never after."""
    release = threading.Event()
    late: list[Future[None]] = []
    with Lease(ctx.sessions, ctx.settings.lease_timeout) as lease:
        packs = PackSession(ctx, lease)

        def last_task() -> None:
            release.wait(10)
            late.append(packs.placer().submit(time.sleep, 0.5))  # a batch being placed

        packs.worker().submit(last_task)
        stopping = threading.Thread(target=packs.discard)
        stopping.start()
        time.sleep(0.2)  # the discard waits for the chunking thread's running task
        release.set()
        stopping.join(10)
        assert not stopping.is_alive()
        assert late and late[0].done()


def test_a_rejected_session_leaves_no_pack(ctx: RegistryContext) -> None:
    with Lease(ctx.sessions, ctx.settings.lease_timeout) as lease:
        packs = PackSession(ctx, lease)
        writer = FileWriter(packs)
        writer.write(os.urandom(3 * MiB))
        writer.close()
        packs.finish()
        assert list(ctx.blobs.iter_packs())
        packs.discard()
    assert list(ctx.blobs.iter_packs()) == []


@pytest.mark.settings(lease_timeout=0.5)
def test_a_stale_lease_fences_the_index(ctx: RegistryContext) -> None:
    """A lease whose heartbeat went stale stays dead: indexing fails, even if it beats again."""
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import update

    from registry.db.tables import UploadLease
    from registry.errors import PushStalled

    with Lease(ctx.sessions, ctx.settings.lease_timeout) as lease:
        with ctx.transaction() as session:
            session.execute(
                update(UploadLease)
                .where(UploadLease.id == lease.id)
                .values(heartbeat_at=datetime.now(UTC) - timedelta(seconds=5))
            )
        lease.beat()  # too late: the lease stays dead
        with pytest.raises(PushStalled, match="REGISTRY_LEASE_TIMEOUT"), ctx.transaction() as s:
            lease.fence(s)


def test_a_file_being_written_holds_a_bounded_part_of_its_bytes(
    sqlite_template: Path, tmp_path: Path
) -> None:
    """Between the caller's pieces and the pack file on disk, a push holds a few MiB of a
    file however large it is: two batches of cut chunks (one being placed, one cut), the
    pieces handed to the chunking thread, the pack writer's gathered writes. That is
    most of a pushing server worker's memory (issue 27, figure 6); tracemalloc counts
    every allocation Python makes while 96 MiB go through."""
    import tracemalloc

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    shutil.copy(sqlite_template, data_dir / "registry.db")
    context = RegistryContext.open(Settings(data_dir=data_dir, migrate_on_start=False))
    try:
        with Lease(context.sessions, context.settings.lease_timeout) as lease:
            packs = PackSession(context, lease)
            writer = FileWriter(packs)
            tracemalloc.start()
            try:
                for _ in range(96 * 4):
                    writer.write(os.urandom(MiB // 4))
                writer.close()
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            packs.finish()
    finally:
        context.close()
    held = 2 * LOOKUP_BATCH_BYTES + (PIECES_IN_FLIGHT + 1) * HANDOFF_BYTES  # batches, hand-offs
    assert peak < held + 8 * MiB, f"{peak / MiB:.1f} MiB held at once"


def _write_twice_in_one_push(
    ctx: RegistryContext, data: bytes
) -> tuple[PackSession, list[FileLayout]]:
    """``data`` as two files of one push, 1 MiB packs: the second file's chunks are in
    packs the push has published by then (found in the index) or not yet (its own)."""
    return push_files(ctx, [data + b"a", data + b"b"])


def test_a_push_keeps_no_reference_to_the_chunks_it_published(
    ctx: RegistryContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a pack is published its chunks are the index's: a push holds references only
    to chunks the index would not find (issue 27: a 16 GiB push grew by one per chunk),
    and still stores each chunk once."""
    monkeypatch.setattr(packing, "PACK_MAX_BYTES", MiB)
    block = os.urandom(6 * MiB)
    packs, layouts = _write_twice_in_one_push(ctx, block)
    appender = packs._packs  # what the push holds
    assert appender.copies_indexed_elsewhere() == {}
    assert layouts[1].new_chunk_bytes < ctx.chunk_params.max_size * 2
    assert stored_bytes(ctx) < len(block) + ctx.chunk_params.max_size * 2
    assert read_back(ctx, layouts[1].sha256) == block + b"b"


def test_a_push_healing_damaged_chunks_writes_each_once(
    ctx: RegistryContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A damaged chunk's row keeps pointing at the damaged copy until the push heals it:
    the push's own copy is the one it reuses for a second occurrence, then heals with."""
    monkeypatch.setattr(packing, "PACK_MAX_BYTES", MiB)
    block = os.urandom(6 * MiB)
    (first,) = write_files(ctx, [block + b"a"])
    with ctx.sessions() as s:
        names = list(s.scalars(select(Pack.name)))
        chunk_count = s.scalar(select(func.count()).select_from(Chunk))
    for name in names:
        record_damage(ctx, name, None, CORRUPT, "test")
    before = stored_bytes(ctx)
    packs, layouts = _write_twice_in_one_push(ctx, block)
    # each damaged chunk written again once, and the second file's different last chunk
    assert packs.chunks_written == chunk_count + 1
    assert stored_bytes(ctx) - before == packs.chunk_bytes_written
    assert len(packs.healed) == chunk_count
    assert packs.healed_bytes == len(block) + 1  # the first file's every chunk
    with ctx.sessions() as s:
        assert s.scalar(select(func.count()).select_from(DamagedChunk)) == 0
    assert read_back(ctx, first.sha256) == block + b"a"
    assert read_back(ctx, layouts[1].sha256) == block + b"b"


def test_the_pack_table_cache_stays_small_once_full(ctx: RegistryContext) -> None:
    """Reading many packs keeps TABLES_CACHED parsed tables, a few MiB: a worker that
    served a large pull (or many) must not hold every pack's table it read (issue 27)."""
    import tracemalloc

    from registry.services.chunkstore import verified

    entries = 1000  # a 64 MiB pack's, chunks averaging 64 KiB
    names = [f"{i:032x}" for i in range(2 * verified.TABLES_CACHED)]
    length = (65_536).to_bytes(4, "big")  # a table entry: BLAKE3 digest, chunk length
    with ctx.transaction() as session:
        for name in names:
            table = b"".join(os.urandom(32) + length for _ in range(entries))
            session.add(Pack(name=name, size=entries << 16, chunk_count=entries, chunk_table=table))
    cache = verified._Tables()
    tracemalloc.start()
    try:
        for at in range(0, len(names), 10):  # as reads come, a file's few packs at a time
            cache.get(ctx, names[at : at + 10])
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(cache._tables) == verified.TABLES_CACHED
    assert held < 16 * MiB, f"{held / MiB:.0f} MiB held"
