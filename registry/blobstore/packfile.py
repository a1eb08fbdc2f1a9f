"""A pack file being written: gathered writes, early writeback, and leaving the page cache.

``FilePackWriter`` is the filesystem store's ``PackWriter`` where the filesystem refuses
O_DIRECT (``packdirect`` writes around the page cache elsewhere); the helpers around it
are Linux's ``sync_file_range`` and ``posix_fadvise``, used where the system has them.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable
from pathlib import Path

from registry.blobstore.base import PackWriter

WRITEBACK_BYTES = 8 * 1024 * 1024
GATHER_BYTES = 1024 * 1024
IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024
SYNC_FILE_RANGE_WAIT_BEFORE = 1
SYNC_FILE_RANGE_WRITE = 2
SYNC_FILE_RANGE_WAIT_AFTER = 4
DROP_BEHIND_BYTES = 16 * 1024 * 1024
"""A pack's bytes this far behind its end leave the page cache once on disk (see
``FilePackWriter``)."""


@functools.cache
def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """Linux's sync_file_range(2) (not in the os module), or None where there is none."""
    try:
        import ctypes

        call = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (ImportError, OSError, AttributeError):
        return None
    call.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    return call


def start_writeback(fd: int, offset: int, length: int) -> bool:
    """Start writing ``[offset, offset + length)`` of ``fd`` to disk without waiting for it
    (durability still comes from fsync); False where the system cannot."""
    call = _sync_file_range()
    return call is not None and call(fd, offset, length, SYNC_FILE_RANGE_WRITE) == 0


def drop_written(fd: int, offset: int, length: int) -> bool:
    """Wait until ``[offset, offset + length)`` of ``fd`` is on disk, then drop it from the
    page cache; False where the system cannot (nothing is dropped then)."""
    call = _sync_file_range()
    if call is None or not hasattr(os, "posix_fadvise"):
        return False
    flags = SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER
    if call(fd, offset, length, flags) != 0:
        return False
    os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
    return True


def fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (best effort: not every system can)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def publish_pack_file(fd: int, tmp: Path, final: Path) -> None:
    """Close the fsynced temp file ``fd`` and rename it into place, read-only, durably."""
    os.close(fd)
    os.chmod(tmp, 0o444)
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, final)  # a fresh random name: nothing to overwrite
    fsync_dir(final.parent)


def discard_pack_file(fd: int, tmp: Path) -> None:
    """Close ``fd`` (unless -1) and remove the temp file, quietly (best effort)."""
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()


class FilePackWriter(PackWriter):
    """Appends to a temp file; ``commit`` fsyncs it and renames it into place.

    Chunks are gathered and written with one ``writev`` per ``GATHER_BYTES`` (a push
    appends a chunk of ~80 KiB at a time: a syscall each, and a wait for the GIL
    after each, cost more than the copy). Every ``WRITEBACK_BYTES`` written, the
    kernel is asked to start writing them to disk (``sync_file_range``), so that the
    disk works while the rest arrives and the commit's fsync waits for the tail only.
    """

    def __init__(self, name: str, fd: int, tmp: Path, final: Path) -> None:
        super().__init__(name)
        self._fd = fd
        self._tmp = tmp
        self._final = final
        self._gathered: list[bytes | memoryview] = []
        self._gathered_bytes = 0
        self._written = 0
        self._written_back = 0
        self._dropped = 0

    def write(self, data: bytes | memoryview) -> None:
        self._gathered.append(data)
        self._gathered_bytes += len(data)
        self.size += len(data)
        if self._gathered_bytes >= GATHER_BYTES:
            self._write_gathered()

    def _write_gathered(self) -> None:
        pieces, self._gathered, self._gathered_bytes = self._gathered, [], 0
        while pieces:
            batch = pieces[:IOV_MAX]
            done = os.writev(self._fd, batch)
            self._written += done
            whole = 0  # pieces of ``batch`` written whole; a short write resumes mid-piece
            while whole < len(batch) and done >= len(batch[whole]):
                done -= len(batch[whole])
                whole += 1
            pieces = pieces[whole:]
            if done:
                pieces[0] = memoryview(pieces[0])[done:]
        if self._written - self._written_back >= WRITEBACK_BYTES:
            start_writeback(self._fd, self._written_back, self._written - self._written_back)
            self._written_back = self._written
            behind = self._written_back - DROP_BEHIND_BYTES
            if behind - self._dropped >= DROP_BEHIND_BYTES:
                drop_written(self._fd, self._dropped, behind - self._dropped)
                self._dropped = behind

    def commit(self) -> None:
        try:
            self._write_gathered()
            os.fsync(self._fd)
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_DONTNEED)
            fd, self._fd = self._fd, -1
            publish_pack_file(fd, self._tmp, self._final)
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        self._gathered = []
        fd, self._fd = self._fd, -1
        discard_pack_file(fd, self._tmp)
