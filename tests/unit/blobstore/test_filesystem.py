from __future__ import annotations

import io
import os
import stat
import threading
import time
from itertools import pairwise
from pathlib import Path

import pytest

from registry.blobstore import (
    BlobDigestMismatch,
    BlobStoreUnavailable,
    FilesystemBlobStore,
    filesystem,
)
from registry.blobstore.packfile import FilePackWriter
from tests import rawstore
from tests.blobstore_conformance import BlobStoreConformance, sha


def page_cache_packs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Packs written through the page cache (``FilePackWriter``), as where the filesystem
    refuses O_DIRECT."""
    monkeypatch.setattr(filesystem, "set_direct", lambda fd, on: False)


class TestFilesystemBlobStore(BlobStoreConformance):
    @pytest.fixture(params=["direct packs", "page-cache packs"])
    def store(self, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch):
        if request.param == "page-cache packs":
            page_cache_packs(monkeypatch)
        with FilesystemBlobStore(tmp_path / "blobs") as store:
            yield store

    def raw_get(self, store: FilesystemBlobStore, key: str) -> bytes | None:
        return rawstore.raw_get(store, key)

    def raw_set(self, store: FilesystemBlobStore, key: str, data: bytes) -> None:
        rawstore.raw_set(store, key, data)

    def incomplete_uploads(self, store: FilesystemBlobStore) -> list[str]:
        return rawstore.incomplete_uploads(store)

    def make_abandoned_upload(self, store: FilesystemBlobStore) -> bool:
        store.tmp_dir.mkdir(parents=True, exist_ok=True)
        tmp = store.tmp_dir / f"{sha(b'abandoned')}.deadbeef.tmp"
        tmp.write_bytes(b"half of some")
        old = time.time() - 7200
        os.utime(tmp, (old, old))
        return True

    # -- filesystem specifics ------------------------------------------------------

    def test_layout_and_permissions(self, store: FilesystemBlobStore) -> None:
        data = b"layout"
        h = sha(data)
        store.put_bytes(h, data)
        path = store.root / "sha256" / h[:2] / h[2:4] / h
        assert path.read_bytes() == data
        assert stat.S_IMODE(path.stat().st_mode) == 0o444
        assert store.path_for(h) == path
        assert list(store.tmp_dir.iterdir()) == []  # temp file gone

    def test_full_open_is_a_real_file(self, store: FilesystemBlobStore) -> None:
        data = b"sendfile me"
        store.put_bytes(sha(data), data)
        with store.open(sha(data)) as f:
            assert os.fstat(f.fileno()).st_size == len(data)

    def test_no_temp_left_after_mismatch(self, store: FilesystemBlobStore) -> None:
        with pytest.raises(BlobDigestMismatch):
            store.put(sha(b"a"), io.BytesIO(b"b" * 100_000))
        assert list(store.tmp_dir.iterdir()) == []
        assert not (store.root / "sha256").exists() or not any(
            p.is_file() for p in (store.root / "sha256").rglob("*")
        )

    def test_clean_keeps_fresh_temps(self, store: FilesystemBlobStore) -> None:
        self.make_abandoned_upload(store)
        fresh = store.tmp_dir / "fresh.tmp"
        fresh.write_bytes(b"in flight")
        assert store.clean_stale_uploads(3600) == 1
        assert fresh.exists()
        assert store.clean_stale_uploads(0) == 1
        assert not fresh.exists()

    def test_existing_blob_wins_over_racing_writer(self, store: FilesystemBlobStore) -> None:
        """A writer that finds the final name taken at link time keeps the existing file."""
        data = b"x" * 10_000
        h = sha(data)
        gate = threading.Event()

        class SlowStream(io.RawIOBase):
            def __init__(self) -> None:
                self.inner = io.BytesIO(data)

            def readable(self) -> bool:
                return True

            def readinto(self, buf) -> int:  # type: ignore[override]
                n = self.inner.readinto(buf)
                if n == 0:
                    gate.wait(10)  # let the other writer publish first
                return n

        results = []
        t = threading.Thread(target=lambda: results.append(store.put(h, SlowStream())))
        t.start()
        time.sleep(0.1)
        first = store.put_bytes(h, data)
        inode = store.path_for(h).stat().st_ino
        gate.set()
        t.join()
        assert first.created is True
        assert results[0].created is False
        assert store.path_for(h).stat().st_ino == inode
        assert list(store.tmp_dir.iterdir()) == []

    def test_iter_blobs_ignores_strays(self, store: FilesystemBlobStore) -> None:
        data = b"real"
        store.put_bytes(sha(data), data)
        h = sha(b"misplaced")
        stray_dir = store.root / "sha256" / "zz" / "yy"
        stray_dir.mkdir(parents=True)
        (stray_dir / h).write_bytes(b"misplaced")
        (store.root / "sha256" / sha(data)[:2] / sha(data)[2:4] / "notes.txt").write_text("x")
        assert [i.sha256 for i in store.iter_blobs()] == [sha(data)]

    def test_check_available_unwritable(self, tmp_path: Path) -> None:
        blocker = tmp_path / "file"
        blocker.write_text("not a folder")
        store = FilesystemBlobStore(blocker / "blobs")
        with pytest.raises(BlobStoreUnavailable):
            store.check_available()

    def test_root_created_lazily(self, tmp_path: Path) -> None:
        store = FilesystemBlobStore(tmp_path / "a" / "b")
        assert not (tmp_path / "a").exists()
        assert list(store.iter_blobs()) == []
        assert store.clean_stale_uploads(0) == 0
        store.put_bytes(sha(b"q"), b"q")
        assert store.read_bytes(sha(b"q")) == b"q"


def test_a_pack_being_written_is_handed_to_the_disk_as_it_grows(tmp_path, monkeypatch):
    """Writeback starts every WRITEBACK_BYTES, over consecutive ranges, so the commit's
    fsync waits for the tail only; the pack reads back whole."""
    from registry.blobstore import packfile

    probe = os.open(tmp_path / "probe", os.O_CREAT | os.O_RDWR)
    try:
        assert packfile.start_writeback(probe, 0, 0)  # Linux: the call exists and works
    finally:
        os.close(probe)
    asked: list[tuple[int, int]] = []
    real = packfile.start_writeback

    def recording(fd: int, offset: int, length: int) -> bool:
        asked.append((offset, length))
        return real(fd, offset, length)

    monkeypatch.setattr(packfile, "start_writeback", recording)
    monkeypatch.setattr(packfile, "WRITEBACK_BYTES", 1 << 20)
    monkeypatch.setattr(packfile, "GATHER_BYTES", 512 * 1024)
    page_cache_packs(monkeypatch)
    store = FilesystemBlobStore(tmp_path / "store")
    writer = store.new_pack("ab" * 16)
    assert isinstance(writer, FilePackWriter)
    data = os.urandom(300 * 1024)
    for _ in range(12):
        writer.write(data)
    writer.commit()
    assert [offset for offset, _ in asked] == [
        0,
        *(sum(n for _, n in asked[:i]) for i in range(1, len(asked))),
    ]
    assert len(asked) == 3 and all(n >= 1 << 20 for _, n in asked)
    assert store.read_pack("ab" * 16, 0, 12 * len(data)) == data * 12


def test_short_gathered_writes_resume_where_they_stopped(tmp_path, monkeypatch):
    """``writev`` may write less than asked (and stop inside a piece): the rest follows,
    in order, and the pack reads back exactly."""
    from registry.blobstore import packfile

    real = os.writev
    calls: list[int] = []

    def short(fd: int, buffers) -> int:  # type: ignore[no-untyped-def]
        calls.append(len(buffers))
        assert len(calls) < 1000, "the writer keeps writing the same bytes"
        joined = b"".join(bytes(b) for b in buffers)
        return real(fd, [joined[: max(1, len(joined) // 3 + 7)]])

    monkeypatch.setattr(packfile.os, "writev", short)
    monkeypatch.setattr(packfile, "GATHER_BYTES", 64 * 1024)
    page_cache_packs(monkeypatch)
    store = FilesystemBlobStore(tmp_path / "store")
    writer = store.new_pack("cd" * 16)
    assert isinstance(writer, FilePackWriter)
    pieces = [os.urandom(n) for n in (1, 5000, 70_000, 3, 130_000, 999)]
    for piece in pieces:
        writer.write(memoryview(piece))
    writer.commit()
    assert len(calls) > len(pieces)  # the writes were short, so more calls than pieces
    assert store.read_pack("cd" * 16, 0, writer.size) == b"".join(pieces)


def test_a_pack_leaves_the_page_cache_behind_its_end_once_on_disk(tmp_path, monkeypatch):
    """Ranges ``DROP_BEHIND_BYTES`` behind the end are dropped in order, each once, never
    the part still being written; the pack reads back whole."""
    from registry.blobstore import packfile

    dropped: list[tuple[int, int]] = []
    real = packfile.drop_written

    def recording(fd: int, offset: int, length: int) -> bool:
        dropped.append((offset, length))
        return real(fd, offset, length)

    monkeypatch.setattr(packfile, "drop_written", recording)
    monkeypatch.setattr(packfile, "GATHER_BYTES", 256 * 1024)
    monkeypatch.setattr(packfile, "WRITEBACK_BYTES", 512 * 1024)
    monkeypatch.setattr(packfile, "DROP_BEHIND_BYTES", 1 << 20)
    page_cache_packs(monkeypatch)
    store = FilesystemBlobStore(tmp_path / "store")
    writer = store.new_pack("ef" * 16)
    assert isinstance(writer, FilePackWriter)
    data = os.urandom(100 * 1024)
    written = 0
    for _ in range(60):
        writer.write(data)
        written += len(data)
        assert all(offset + length <= written - (1 << 20) for offset, length in dropped)
    writer.commit()
    assert dropped and dropped[0][0] == 0
    assert all(a + n == b for (a, n), (b, _) in pairwise(dropped))
    assert store.read_pack("ef" * 16, 0, written) == data * 60
