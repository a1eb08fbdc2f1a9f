"""Packs written around the page cache (``DirectPackWriter``): aligned writes, the tail,
and what happens when the filesystem refuses O_DIRECT or cuts a write short."""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.blobstore import FilesystemBlobStore, filesystem, packdirect
from registry.blobstore.base import new_pack_name
from registry.blobstore.packdirect import DIRECT_ALIGN, DIRECT_BUFFER_BYTES, DirectPackWriter
from registry.blobstore.packfile import FilePackWriter

BUFFER = DIRECT_BUFFER_BYTES


def direct_possible(folder: Path) -> bool:
    """Whether ``folder``'s filesystem takes O_DIRECT (the suite's temp folders do here)."""
    fd = os.open(folder / "probe", os.O_CREAT | os.O_WRONLY)
    try:
        return packdirect.set_direct(fd, True)
    finally:
        os.close(fd)
        os.unlink(folder / "probe")


@pytest.fixture
def store(tmp_path: Path) -> FilesystemBlobStore:
    if not direct_possible(tmp_path):
        refused = "the temp folder's filesystem refuses O_DIRECT"
        if os.environ.get("CI"):
            pytest.fail(f"{refused}: CI runs these tests on one that takes it")
        pytest.skip(refused)
    return FilesystemBlobStore(tmp_path / "store")


class Recorded:
    """Every ``os.pwrite`` of the writers: (offset, length, O_DIRECT on) each."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[int, int, bool]] = []
        self.real = os.pwrite
        monkeypatch.setattr(packdirect.os, "pwrite", self)

    def __call__(self, fd: int, data: memoryview, offset: int) -> int:
        direct = bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT)
        self.calls.append((offset, len(data), direct))
        return self.real(fd, data, offset)


def write_all(writer: DirectPackWriter, pieces: list[bytes]) -> bytes:
    for piece in pieces:
        writer.write(memoryview(piece))
    writer.commit()
    return b"".join(pieces)


def test_the_store_writes_packs_around_the_page_cache_where_it_can(store, monkeypatch):
    writer = store.new_pack(new_pack_name())
    assert isinstance(writer, DirectPackWriter)
    writer.abort()
    monkeypatch.setattr(filesystem, "set_direct", lambda fd, on: False)
    writer = store.new_pack(new_pack_name())
    assert isinstance(writer, FilePackWriter)  # a filesystem without O_DIRECT
    writer.abort()


@pytest.mark.parametrize(
    "sizes",
    [
        [1],
        [BUFFER],  # exactly one buffer, no tail
        [DIRECT_ALIGN * 3],  # a tail of whole blocks
        [BUFFER - 1, 2, BUFFER * 2 + 5],  # a write across two buffers and a tail
        [70_000] * 40,  # chunks, as a push appends them
        [BUFFER * 3 + DIRECT_ALIGN + 17],
    ],
)
def test_a_pack_reads_back_exactly_and_went_to_disk_in_aligned_direct_writes(
    store, monkeypatch, sizes
):
    recorded = Recorded(monkeypatch)
    name = new_pack_name()
    writer = store.new_pack(name)
    data = write_all(writer, [os.urandom(n) for n in sizes])
    assert writer.size == len(data)
    assert store.pack_size(name) == len(data)
    assert store.read_pack(name, 0, len(data)) == data
    blocks = len(data) - len(data) % DIRECT_ALIGN
    direct = [(offset, length) for offset, length, on in recorded.calls if on]
    assert sum(length for _, length in direct) == blocks
    assert all(offset % DIRECT_ALIGN == 0 == length % DIRECT_ALIGN for offset, length in direct)
    buffered = [(offset, length) for offset, length, on in recorded.calls if not on]
    assert buffered == ([(blocks, len(data) - blocks)] if len(data) > blocks else [])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 3 * BUFFER // 2), min_size=1, max_size=6))
def test_any_sequence_of_writes_reads_back(tmp_path_factory, sizes):
    folder = tmp_path_factory.mktemp("direct")
    store = FilesystemBlobStore(folder)
    name = new_pack_name()
    writer = store.new_pack(name)
    pieces = [os.urandom(n) for n in sizes]
    data = write_all(writer, pieces)
    assert store.read_pack(name, 0, len(data)) == data


def test_a_refused_direct_write_goes_on_through_the_page_cache(store, monkeypatch):
    """EINVAL (the filesystem wants another alignment): the same bytes again, buffered."""
    real = os.pwrite
    refused: list[int] = []

    def picky(fd: int, data: memoryview, offset: int) -> int:
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT and offset >= BUFFER:
            refused.append(offset)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, data, offset)

    monkeypatch.setattr(packdirect.os, "pwrite", picky)
    name = new_pack_name()
    writer = store.new_pack(name)
    data = write_all(writer, [os.urandom(BUFFER // 3) for _ in range(10)])
    # Refused once per write under way at the time; the rest went through the page cache.
    assert 1 <= len(refused) <= packdirect.WRITING_THREADS
    assert store.read_pack(name, 0, len(data)) == data


def test_two_writes_refused_at_once_both_go_on_through_the_page_cache(store, monkeypatch):
    """Both writing threads tried O_DIRECT; the second is refused after the first turned
    it off, and must retry its own write too, not fail the pack."""
    real = os.pwrite
    both_direct = threading.Barrier(2, timeout=10)
    order: list[int] = []
    lock = threading.Lock()

    def refused_together(fd: int, data: memoryview, offset: int) -> int:
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            both_direct.wait()
            with lock:
                order.append(offset)
                second = len(order) == 2
            if second:
                time.sleep(0.2)  # refused after the first has turned O_DIRECT off
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, data, offset)

    monkeypatch.setattr(packdirect.os, "pwrite", refused_together)
    name = new_pack_name()
    writer = store.new_pack(name)
    data = write_all(writer, [os.urandom(BUFFER) for _ in range(2)] + [os.urandom(999)])
    assert sorted(order) == [0, BUFFER]
    assert store.read_pack(name, 0, len(data)) == data


def test_a_short_direct_write_is_finished_through_the_page_cache(store, monkeypatch):
    real = os.pwrite
    calls: list[bool] = []

    def short(fd: int, data: memoryview, offset: int) -> int:
        direct = bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT)
        calls.append(direct)
        if direct:
            return real(fd, data[:DIRECT_ALIGN], offset)  # whole blocks, but fewer
        return real(fd, data, offset)

    monkeypatch.setattr(packdirect.os, "pwrite", short)
    name = new_pack_name()
    writer = store.new_pack(name)
    data = write_all(writer, [os.urandom(BUFFER + 999) for _ in range(3)])
    assert calls[0] and not calls[-1]
    assert calls.count(True) <= packdirect.WRITING_THREADS  # then O_DIRECT went off
    assert store.read_pack(name, 0, len(data)) == data


def test_full_buffers_are_written_on_other_threads_a_few_at_a_time(store, monkeypatch):
    """The caller fills the next buffer while full ones are written; once
    WRITES_IN_FLIGHT wait for the disk, it waits too (a pack's memory stays bounded)."""
    real = os.pwrite
    disk = threading.Event()
    started: list[str] = []

    def slow(fd: int, data: memoryview, offset: int) -> int:
        started.append(threading.current_thread().name)
        disk.wait(10)
        return real(fd, data, offset)

    monkeypatch.setattr(packdirect.os, "pwrite", slow)
    name = new_pack_name()
    writer = store.new_pack(name)
    pieces = [os.urandom(BUFFER) for _ in range(packdirect.WRITES_IN_FLIGHT + 2)]
    filled = 0

    def fill() -> None:
        nonlocal filled
        for piece in pieces:
            writer.write(piece)
            filled += 1

    filler = threading.Thread(target=fill)
    filler.start()
    deadline = time.monotonic() + 10
    while len(started) < packdirect.WRITING_THREADS and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    assert filled == packdirect.WRITES_IN_FLIGHT  # the next full buffer waits for a write
    assert all(name.startswith("pack-write") for name in started)
    disk.set()
    filler.join(10)
    writer.commit()
    assert store.read_pack(name, 0, writer.size) == b"".join(pieces)


@pytest.mark.parametrize("failing_write", [0, 3])
def test_a_failed_write_fails_the_pack_and_leaves_nothing(store, monkeypatch, failing_write):
    real = os.pwrite
    writes = 0

    def full(fd: int, data: memoryview, offset: int) -> int:
        nonlocal writes
        writes += 1
        if writes > failing_write:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, offset)

    monkeypatch.setattr(packdirect.os, "pwrite", full)
    name = new_pack_name()
    writer = store.new_pack(name)
    with pytest.raises(OSError) as caught:  # from a later write, or from the commit
        for _ in range(20):
            writer.write(os.urandom(BUFFER // 2))
        writer.commit()
    assert caught.value.errno == errno.ENOSPC
    writer.abort()
    assert store.pack_size(name) is None
    assert list((store.root / "tmp").iterdir()) == []


def test_a_failed_commit_leaves_nothing(store, monkeypatch):
    def broken_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(packdirect.os, "fsync", broken_fsync)
    name = new_pack_name()
    writer = store.new_pack(name)
    writer.write(os.urandom(3 * BUFFER + 5000))
    with pytest.raises(OSError):
        writer.commit()
    assert store.pack_size(name) is None
    assert list((store.root / "tmp").iterdir()) == []


def test_abort_waits_for_the_writes_under_way(store, monkeypatch):
    """Nothing writes to a descriptor after it is closed (it may be another file's by then)."""
    real = os.pwrite
    closed: list[int] = []
    after_close: list[int] = []
    real_close = os.close

    def slow(fd: int, data: memoryview, offset: int) -> int:
        time.sleep(0.05)
        if fd in closed:
            after_close.append(offset)
        return real(fd, data, offset)

    def recording_close(fd: int) -> None:
        closed.append(fd)
        real_close(fd)

    monkeypatch.setattr(packdirect.os, "pwrite", slow)
    monkeypatch.setattr(packdirect.os, "close", recording_close)
    writer = store.new_pack(new_pack_name())
    for _ in range(packdirect.WRITES_IN_FLIGHT):
        writer.write(os.urandom(BUFFER))
    writer.abort()
    assert closed and after_close == []
    assert list((store.root / "tmp").iterdir()) == []


def test_buffers_are_reused_and_few_are_kept(store, monkeypatch):
    buffers = packdirect._Buffers()
    monkeypatch.setattr(packdirect, "_BUFFERS", buffers)
    writers = [store.new_pack(new_pack_name()) for _ in range(packdirect.SPARE_BUFFERS + 2)]
    taken = [w._buffer for w in writers]
    assert len({id(b) for b in taken}) == len(writers)
    for w in writers[:-1]:
        w.write(b"x" * 100)
        w.commit()
    writers[-1].abort()
    assert len(buffers._spare) == packdirect.SPARE_BUFFERS
    assert sum(b.closed for b in taken) == len(writers) - packdirect.SPARE_BUFFERS
    again = store.new_pack(new_pack_name())
    assert again._buffer in taken and not again._buffer.closed
    again.write(os.urandom(3 * BUFFER))  # full buffers go back to the pool once written
    again.commit()
    assert len(buffers._spare) == packdirect.SPARE_BUFFERS


def test_a_forked_child_writes_packs_on_writing_threads_of_its_own(store):
    """The parent's writing threads do not exist in a forked child: it starts its own
    (a child submitting to the parent's pool would wait forever)."""
    parent = store.new_pack(new_pack_name())
    parent.write(os.urandom(2 * BUFFER))  # the parent's writing threads are running
    parent.commit()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        try:
            name = new_pack_name()
            writer = store.new_pack(name)
            data = os.urandom(3 * BUFFER + 100)
            writer.write(data)
            writer.commit()
            os._exit(0 if store.read_pack(name, 0, len(data)) == data else 1)
        except BaseException:
            os._exit(2)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child's pack write hung")
