"""The local-folder BlobStore (the embedded default).

A put streams into a temp file under ``root/tmp/`` (same filesystem as the
blobs) while hashing, fsyncs it, makes it read-only, then ``os.link``s it to
``root/sha256/ab/cd/<hex>``: linking never replaces an existing file, so the
first published copy wins and nobody ever sees a partial blob. A
``put(..., replace=True)`` (over a copy found damaged) ``os.replace``s the
read-only final file with the fsynced temp file instead: atomic too, readers
see the old or the new file whole. The temp file is always removed afterwards.
Shard directories are created on demand.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import tempfile
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from registry.blobstore.base import (
    BLOB_DIR,
    PACK_DIR,
    TMP_DIR,
    BlobInfo,
    BlobStore,
    PackInfo,
    PackWriter,
    PutResult,
    RangeReader,
    blob_key,
    is_pack_name,
    pack_key,
    validate_range,
    validate_sha256,
)
from registry.blobstore.errors import (
    BlobDigestMismatch,
    BlobNotFound,
    BlobStoreUnavailable,
    PackNotFound,
)
from registry.blobstore.packdirect import DirectPackWriter, set_direct
from registry.blobstore.packfile import FilePackWriter, fsync_dir
from registry.carton.digests import is_sha256
from registry.carton.streams import CHUNK, hash_stream, pread_range

_LINK_UNSUPPORTED = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK}


class FilesystemBlobStore(BlobStore):
    parallel_pack_reads = True

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser().absolute()
        self.tmp_dir = self.root / TMP_DIR
        self.blob_dir = self.root / BLOB_DIR
        self.pack_dir = self.root / PACK_DIR

    def __repr__(self) -> str:
        return f"FilesystemBlobStore({str(self.root)!r})"

    def path_for(self, sha256: str) -> Path:
        """Where the blob lives (whether or not it exists)."""
        return self.root / blob_key(validate_sha256(sha256))

    # -- writing ---------------------------------------------------------------

    def put(
        self, sha256: str, stream: BinaryIO, *, size_hint: int | None = None, replace: bool = False
    ) -> PutResult:
        final = self.path_for(sha256)
        if not replace and final.exists():
            actual, size = hash_stream(stream, self.chunk_size)
            if actual != sha256:
                raise BlobDigestMismatch(sha256, actual, size)
            # Written again: GC's grace period starts over, as for a new blob.
            with contextlib.suppress(OSError):
                os.utime(final)
            return PutResult(sha256, size, False)

        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f"{sha256}.", suffix=".tmp", dir=self.tmp_dir)
        tmp = Path(tmp_name)
        try:
            h = hashlib.sha256()
            size = 0
            with os.fdopen(fd, "wb", buffering=0) as out:
                while True:
                    data = stream.read(self.chunk_size)
                    if not data:
                        break
                    h.update(data)
                    view = memoryview(data)
                    while view:
                        n = out.write(view)
                        view = view[n:]
                    size += len(data)
                out.flush()
                os.fsync(out.fileno())
            actual = h.hexdigest()
            if actual != sha256:
                raise BlobDigestMismatch(sha256, actual, size)
            os.chmod(tmp, 0o444)
            final.parent.mkdir(parents=True, exist_ok=True)
            if replace:
                os.replace(tmp, final)  # the directory entry is swapped: mode 0444 is no bar
                created = True
            else:
                created = self._publish(tmp, final)
            if created:
                fsync_dir(final.parent)
            return PutResult(sha256, size, created)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def _publish(self, tmp: Path, final: Path) -> bool:
        try:
            os.link(tmp, final)
            return True
        except FileExistsError:
            return False  # the existing blob wins
        except OSError as exc:
            if exc.errno not in _LINK_UNSUPPORTED:
                raise
        # No hard links here (some network / FUSE filesystems): rename instead.
        # A concurrent writer may replace the file with identical bytes; harmless.
        if final.exists():
            return False
        os.replace(tmp, final)
        return True

    # -- reading ---------------------------------------------------------------

    def open(self, sha256: str, start: int = 0, end: int | None = None) -> BinaryIO:
        validate_range(start, end)
        path = self.path_for(sha256)
        try:
            f = open(path, "rb")  # noqa: SIM115 - returned to the caller
        except FileNotFoundError:
            raise BlobNotFound(sha256) from None
        return _ranged(f, start, end)

    def stat(self, sha256: str) -> int | None:
        try:
            return self.path_for(sha256).stat().st_size
        except FileNotFoundError:
            return None

    def iter_blobs(self) -> Iterator[BlobInfo]:
        if not self.blob_dir.is_dir():
            return
        for first in sorted(os.scandir(self.blob_dir), key=lambda e: e.name):
            if not first.is_dir(follow_symlinks=False) or len(first.name) != 2:
                continue
            for second in sorted(os.scandir(first.path), key=lambda e: e.name):
                if not second.is_dir(follow_symlinks=False) or len(second.name) != 2:
                    continue
                for entry in sorted(os.scandir(second.path), key=lambda e: e.name):
                    name = entry.name
                    if not is_sha256(name) or name[0:2] != first.name or name[2:4] != second.name:
                        continue
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # deleted meanwhile
                    yield BlobInfo(name, st.st_size, datetime.fromtimestamp(st.st_mtime, UTC))

    # -- deleting / maintenance -----------------------------------------------

    def delete(self, sha256: str) -> bool:
        try:
            self.path_for(sha256).unlink()
            return True
        except FileNotFoundError:
            return False

    # -- packs ---------------------------------------------------------------------

    def pack_path(self, name: str) -> Path:
        return self.root / pack_key(name)

    def new_pack(self, name: str) -> PackWriter:
        final = self.pack_path(name)
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f"pack-{name}.", suffix=".tmp", dir=self.tmp_dir)
        if set_direct(fd, True):
            return DirectPackWriter(name, fd, Path(tmp), final)
        return FilePackWriter(name, fd, Path(tmp), final)

    def open_pack(self, name: str, start: int = 0, end: int | None = None) -> BinaryIO:
        validate_range(start, end)
        try:
            f = open(self.pack_path(name), "rb")  # noqa: SIM115 - returned to the caller
        except FileNotFoundError:
            raise PackNotFound(name) from None
        return _ranged(f, start, end)

    def read_pack(self, name: str, start: int, end: int) -> bytes:
        """One ``os.pread`` into one fresh buffer (more only if the kernel returns less)."""
        validate_range(start, end)
        try:
            fd = os.open(self.pack_path(name), os.O_RDONLY)
        except FileNotFoundError:
            raise PackNotFound(name) from None
        try:
            data = os.pread(fd, end - start, start)
            if 0 < len(data) < end - start:
                data += b"".join(pread_range(fd, start + len(data), end, end - start))
            return data
        finally:
            os.close(fd)

    def pack_size(self, name: str) -> int | None:
        try:
            return self.pack_path(name).stat().st_size
        except FileNotFoundError:
            return None

    def iter_chunks(
        self, sha256: str, start: int = 0, end: int | None = None, chunk_size: int = CHUNK
    ) -> Iterator[bytes]:
        """``os.pread`` into fresh pieces: one copy from the page cache, no file object."""
        validate_range(start, end)
        try:
            fd = os.open(self.path_for(sha256), os.O_RDONLY)
        except FileNotFoundError:
            raise BlobNotFound(sha256) from None
        try:
            stop = os.fstat(fd).st_size if end is None else end
            yield from pread_range(fd, start, stop, chunk_size)
        finally:
            os.close(fd)

    def iter_pack_ranges(
        self, ranges: Iterable[tuple[str, int, int]], chunk_size: int = CHUNK
    ) -> Iterator[bytes]:
        """``os.pread`` from each pack, its file kept open across consecutive ranges."""
        fd, current = -1, None
        try:
            for name, start, end in ranges:
                validate_range(start, end)
                if name != current:
                    if fd >= 0:
                        os.close(fd)
                        fd, current = -1, None
                    try:
                        fd = os.open(self.pack_path(name), os.O_RDONLY)
                    except FileNotFoundError:
                        raise PackNotFound(name) from None
                    current = name
                yield from pread_range(fd, start, end, chunk_size, PackNotFound(name))
        finally:
            if fd >= 0:
                os.close(fd)

    def iter_packs(self) -> Iterator[PackInfo]:
        if not self.pack_dir.is_dir():
            return
        for shard in sorted(os.scandir(self.pack_dir), key=lambda e: e.name):
            if not shard.is_dir(follow_symlinks=False) or len(shard.name) != 2:
                continue
            for entry in sorted(os.scandir(shard.path), key=lambda e: e.name):
                if not is_pack_name(entry.name) or entry.name[0:2] != shard.name:
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                yield PackInfo(entry.name, st.st_size, datetime.fromtimestamp(st.st_mtime, UTC))

    def delete_pack(self, name: str) -> bool:
        try:
            self.pack_path(name).unlink()
            return True
        except FileNotFoundError:
            return False

    def clean_stale_uploads(self, older_than_seconds: float) -> int:
        if not self.tmp_dir.is_dir():
            return 0
        cutoff = time.time() - older_than_seconds
        removed = 0
        for entry in os.scandir(self.tmp_dir):
            try:
                if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime <= cutoff:
                    os.unlink(entry.path)
                    removed += 1
            except FileNotFoundError:
                continue
        return removed

    def check_available(self) -> None:
        try:
            self.tmp_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BlobStoreUnavailable(f"blob store folder {self.root} is unusable: {exc}") from exc
        if not os.access(self.root, os.W_OK | os.X_OK) or not os.access(
            self.tmp_dir, os.W_OK | os.X_OK
        ):
            raise BlobStoreUnavailable(f"blob store folder {self.root} is not writable")


def _ranged(f: BinaryIO, start: int, end: int | None) -> BinaryIO:
    """``f`` positioned at ``start`` and limited to ``end`` (closed on failure)."""
    if start == 0 and end is None:
        return f
    try:
        f.seek(start)
    except BaseException:
        f.close()
        raise
    limit = None if end is None else end - start
    return RangeReader(f, limit)  # type: ignore[return-value]  # a RawIOBase, read as a BinaryIO
