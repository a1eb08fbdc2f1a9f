"""One conformance suite for every BlobStore backend (after zarr-python's ``StoreTests``).

Subclass ``BlobStoreConformance`` in a test module, provide a ``store`` fixture
(function scope, an empty store) and the two out-of-band hooks, which reach the
backend directly, bypassing the interface (at the documented key layout,
``layout_key``, where the backend has keys):

- ``raw_get(store, sha256)``: the bytes stored under that digest's key, or None;
- ``raw_set(store, sha256, data)``: write ``data`` under that key, unchecked.

So the tests check what the interface wrote, and read what was written behind its
back (restored backups, rsync-ed folders, a disk that rots). Optional hooks:

- ``large_size``: bytes for the "larger than a part" test (default ~12 MiB)
- ``make_abandoned_upload(store)``: leave an incomplete upload behind, older
  than any cutoff; return True, or False if the backend has no such thing
- ``created_exactly_once``: whether concurrent puts report created=True once
"""

from __future__ import annotations

import abc
import hashlib
import io
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from registry.blobstore import BlobDigestMismatch, BlobInfo, BlobNotFound, BlobStore, PutResult

MiB = 1024 * 1024


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def layout_key(sha256: str) -> str:
    """Where every backend keeps a blob, relative to its root (``blobstore/base.py``)."""
    return f"sha256/{sha256[:2]}/{sha256[2:4]}/{sha256}"


class TrickleStream(io.RawIOBase):
    """A non-seekable stream that returns short, irregular reads."""

    def __init__(self, data: bytes, max_read: int = 300_001) -> None:
        self._data = memoryview(data)
        self._pos = 0
        self._max = max_read
        self._n = 0
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        self._n += 1
        wobble = max(1, self._max - (self._n % 7) * 997)
        n = min(len(buffer), wobble, len(self._data) - self._pos)
        if n <= 0:
            return 0
        buffer[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        self.bytes_read += n
        return n


class FailingStream(io.RawIOBase):
    """Yields ``data`` then raises, like a client that disconnects mid-upload."""

    def __init__(self, data: bytes) -> None:
        self._inner = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        n = self._inner.readinto(buffer)
        if n == 0:
            raise ConnectionResetError("client went away")
        return n


class BlobStoreConformance(abc.ABC):
    large_size: int = 12 * MiB + 12345
    created_exactly_once: bool = True

    @abc.abstractmethod
    def raw_get(self, store: BlobStore, sha256: str) -> bytes | None:
        """The bytes under ``layout_key(sha256)``, read from the backend directly."""

    @abc.abstractmethod
    def raw_set(self, store: BlobStore, sha256: str, data: bytes) -> None:
        """Write ``data`` under ``layout_key(sha256)`` directly, without any check."""

    def make_abandoned_upload(self, store: BlobStore) -> bool:
        return False

    # -- out of band: what the interface wrote, and what it reads -----------------------

    def test_put_writes_the_bytes_under_the_layout_key(self, store: BlobStore) -> None:
        small, large = b"small blob", os.urandom(self.large_size)
        assert self.raw_get(store, sha(small)) is None
        store.put_bytes(sha(small), small)
        store.put(sha(large), TrickleStream(large))
        assert self.raw_get(store, sha(small)) == small
        assert self.raw_get(store, sha(large)) == large

    def test_reads_what_was_written_behind_its_back(self, store: BlobStore) -> None:
        data = bytes(range(256)) * 50
        h = sha(data)
        self.raw_set(store, h, data)
        assert store.exists(h) and store.stat(h) == len(data)
        assert store.exists_many([h, sha(b"other")]) == {h}
        assert store.read_bytes(h) == data
        assert store.read_bytes(h, 100, 300) == data[100:300]
        assert [(i.sha256, i.size) for i in store.iter_blobs()] == [(h, len(data))]

    def test_reads_do_not_verify_bytes(self, store: BlobStore) -> None:
        """A blob that rotted on disk is served as it is: finding it is fsck's job."""
        h = sha(b"original")
        self.raw_set(store, h, b"rotten")
        assert store.stat(h) == len(b"rotten")
        assert store.read_bytes(h) == b"rotten"

    def test_put_keeps_a_blob_that_is_already_there(self, store: BlobStore) -> None:
        data = b"restored from a backup"
        self.raw_set(store, sha(data), data)
        assert store.put_bytes(sha(data), data) == PutResult(sha(data), len(data), False)
        assert self.raw_get(store, sha(data)) == data

    def test_delete_removes_what_was_set_behind_its_back(self, store: BlobStore) -> None:
        data = b"set out of band"
        self.raw_set(store, sha(data), data)
        assert store.delete(sha(data)) is True
        assert self.raw_get(store, sha(data)) is None

    def test_a_refused_put_writes_nothing_anywhere(self, store: BlobStore) -> None:
        data = os.urandom(self.large_size)
        claimed = sha(b"claimed")
        with pytest.raises(BlobDigestMismatch):
            store.put(claimed, TrickleStream(data))
        assert self.raw_get(store, claimed) is None
        assert self.raw_get(store, sha(data)) is None

    # -- basics ----------------------------------------------------------------

    def test_put_open_stat_exists_delete(self, store: BlobStore) -> None:
        data = b"hello, carton registry\n" * 100
        h = sha(data)
        assert not store.exists(h)
        assert store.stat(h) is None

        result = store.put(h, io.BytesIO(data))
        assert result == PutResult(h, len(data), True)
        assert store.exists(h)
        assert store.stat(h) == len(data)
        with store.open(h) as f:
            assert f.read() == data
        assert b"".join(store.iter_chunks(h, chunk_size=7)) == data

        assert store.delete(h) is True
        assert not store.exists(h)
        assert store.stat(h) is None
        assert store.delete(h) is False
        with pytest.raises(BlobNotFound):
            store.open(h)

    def test_put_bytes(self, store: BlobStore) -> None:
        data = os.urandom(1000)
        assert store.put_bytes(sha(data), data) == PutResult(sha(data), 1000, True)
        assert store.read_bytes(sha(data)) == data

    def test_iter_blobs(self, store: BlobStore) -> None:
        assert list(store.iter_blobs()) == []
        blobs = {sha(d): d for d in (b"a", b"bb", b"ccc" * 1000, b"")}
        before = datetime.now(UTC) - timedelta(minutes=5)
        for h, d in blobs.items():
            store.put_bytes(h, d)
        infos = list(store.iter_blobs())
        assert all(isinstance(i, BlobInfo) for i in infos)
        assert {i.sha256: i.size for i in infos} == {h: len(d) for h, d in blobs.items()}
        for info in infos:
            assert info.modified.tzinfo is not None
            assert info.modified.utcoffset() == timedelta(0)
            assert before <= info.modified <= datetime.now(UTC) + timedelta(minutes=5)
        store.delete(sha(b"a"))
        assert {i.sha256 for i in store.iter_blobs()} == set(blobs) - {sha(b"a")}

    def test_exists_many(self, store: BlobStore) -> None:
        a, b, c = b"one", b"two", b"three"
        store.put_bytes(sha(a), a)
        store.put_bytes(sha(b), b)
        assert store.exists_many([sha(a), sha(b), sha(c), sha(a)]) == {sha(a), sha(b)}
        assert store.exists_many([]) == set()

    # -- ranges ------------------------------------------------------------------

    def test_ranges(self, store: BlobStore) -> None:
        data = bytes(range(256)) * 40  # 10240 bytes
        h = sha(data)
        store.put_bytes(h, data)

        def read(start: int = 0, end: int | None = None) -> bytes:
            with store.open(h, start, end) as f:
                return f.read()

        assert read() == data
        assert read(0, None) == data
        assert read(0, len(data)) == data
        assert read(100) == data[100:]
        assert read(0, 1) == data[:1]
        assert read(100, 200) == data[100:200]
        assert read(len(data) - 1) == data[-1:]
        assert read(5, 5) == b""
        assert read(0, 0) == b""
        assert read(len(data), len(data)) == b""
        # clamped past the end
        assert read(10000, 20000) == data[10000:]
        assert read(len(data)) == b""
        assert read(len(data) + 10) == b""
        # chunked reads honour the range
        assert b"".join(store.iter_chunks(h, 1000, 5000, chunk_size=333)) == data[1000:5000]
        # small reads
        with store.open(h, 10, 20) as f:
            assert f.read(3) == data[10:13]
            assert f.read(100) == data[13:20]
            assert f.read(1) == b""

    def test_invalid_ranges(self, store: BlobStore) -> None:
        data = b"x" * 100
        store.put_bytes(sha(data), data)
        with pytest.raises(ValueError):
            store.open(sha(data), -1)
        with pytest.raises(ValueError):
            store.open(sha(data), 10, 5)

    def test_open_absent_raises_not_found(self, store: BlobStore) -> None:
        h = sha(b"never stored")
        with pytest.raises(BlobNotFound) as info:
            store.open(h)
        assert info.value.sha256 == h
        assert h in str(info.value)
        with pytest.raises(BlobNotFound):
            store.open(h, 0, 0)
        with pytest.raises(BlobNotFound):
            store.open(h, 5, 10)
        with pytest.raises(BlobNotFound):
            list(store.iter_chunks(h))

    # -- idempotency and verification ------------------------------------------------

    def test_put_is_idempotent_existing_wins(self, store: BlobStore) -> None:
        data = b"same bytes" * 1000
        h = sha(data)
        assert store.put_bytes(h, data).created is True
        first = {i.sha256: i for i in store.iter_blobs()}[h]
        stream = TrickleStream(data, 1000)
        again = store.put(h, stream)
        assert again == PutResult(h, len(data), False)
        assert stream.bytes_read == len(data)  # the stream was consumed (verified)
        assert [i.sha256 for i in store.iter_blobs()] == [h]
        assert {i.sha256: i for i in store.iter_blobs()}[h].size == first.size
        assert store.read_bytes(h) == data

    def test_wrong_digest_leaves_nothing(self, store: BlobStore) -> None:
        data = b"these bytes"
        claimed = sha(b"other bytes")
        with pytest.raises(BlobDigestMismatch) as info:
            store.put(claimed, io.BytesIO(data))
        message = str(info.value)
        assert claimed in message
        assert sha(data) in message
        assert not store.exists(claimed)
        assert not store.exists(sha(data))
        assert list(store.iter_blobs()) == []
        with pytest.raises(BlobNotFound):
            store.open(claimed)

    def test_wrong_digest_on_existing_blob_raises(self, store: BlobStore) -> None:
        data = b"the real content"
        h = sha(data)
        store.put_bytes(h, data)
        with pytest.raises(BlobDigestMismatch):
            store.put(h, io.BytesIO(b"an impostor"))
        assert store.read_bytes(h) == data
        assert [i.sha256 for i in store.iter_blobs()] == [h]

    def test_wrong_digest_large_leaves_nothing(self, store: BlobStore) -> None:
        data = os.urandom(self.large_size)
        claimed = sha(b"something else")
        with pytest.raises(BlobDigestMismatch):
            store.put(claimed, TrickleStream(data))
        assert not store.exists(claimed)
        assert list(store.iter_blobs()) == []

    def test_stream_error_leaves_nothing(self, store: BlobStore) -> None:
        data = os.urandom(self.large_size)
        with pytest.raises(OSError):
            store.put(sha(data), FailingStream(data[: len(data) // 2]))
        assert not store.exists(sha(data))
        assert list(store.iter_blobs()) == []
        # and the store still works afterwards
        assert store.put(sha(data), io.BytesIO(data)).created is True

    def test_empty_blob(self, store: BlobStore) -> None:
        h = sha(b"")
        assert store.put(h, io.BytesIO(b"")) == PutResult(h, 0, True)
        assert store.stat(h) == 0
        assert store.exists(h)
        assert store.read_bytes(h) == b""
        assert store.read_bytes(h, 0, 0) == b""
        assert store.put_bytes(h, b"").created is False
        assert [(i.sha256, i.size) for i in store.iter_blobs()] == [(h, 0)]

    def test_large_blob_streamed(self, store: BlobStore) -> None:
        data = os.urandom(self.large_size)
        h = sha(data)
        stream = TrickleStream(data)
        result = store.put(h, stream, size_hint=len(data))
        assert result == PutResult(h, len(data), True)
        assert store.stat(h) == len(data)
        got = hashlib.sha256()
        for chunk in store.iter_chunks(h):
            got.update(chunk)
        assert got.hexdigest() == h
        mid = len(data) // 2
        assert store.read_bytes(h, mid - 10, mid + 10) == data[mid - 10 : mid + 10]
        assert store.read_bytes(h, len(data) - 5) == data[-5:]
        again = store.put(h, TrickleStream(data))
        assert again == PutResult(h, len(data), False)

    def test_exact_part_boundaries(self, store: BlobStore) -> None:
        part = getattr(store, "part_size", 5 * MiB)
        for size in (part - 1, part, part + 1):
            data = os.urandom(size)
            assert store.put(sha(data), io.BytesIO(data)).created is True
            assert store.stat(sha(data)) == size
            assert store.read_bytes(sha(data), size - 3) == data[-3:]

    @pytest.mark.parametrize("size", [1000, 12 * MiB + 1])
    def test_concurrent_puts_of_same_blob(self, store: BlobStore, size: int) -> None:
        data = os.urandom(size)
        h = sha(data)
        n = 6
        barrier = threading.Barrier(n)

        def put() -> PutResult:
            barrier.wait(timeout=30)
            return store.put(h, io.BytesIO(data))

        with ThreadPoolExecutor(n) as pool:
            results = list(pool.map(lambda _: put(), range(n)))
        assert all(r.sha256 == h and r.size == size for r in results)
        created = sum(r.created for r in results)
        if self.created_exactly_once:
            assert created == 1
        else:
            assert created >= 1
        assert [(i.sha256, i.size) for i in store.iter_blobs()] == [(h, size)]
        assert store.read_bytes(h, size - 100) == data[-100:]

    def test_concurrent_puts_of_different_blobs(self, store: BlobStore) -> None:
        blobs = [os.urandom(5000 + i) for i in range(20)]
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda d: store.put_bytes(sha(d), d), blobs))
        assert all(r.created for r in results)
        assert {i.sha256 for i in store.iter_blobs()} == {sha(d) for d in blobs}

    # -- validation ----------------------------------------------------------------

    @pytest.mark.parametrize(
        "bad",
        [
            "",
            "abc",
            sha(b"x").upper(),
            sha(b"x")[:-1],
            sha(b"x") + "0",
            "g" * 64,
            "../" + sha(b"x")[3:],
            " " + sha(b"x")[1:],
        ],
    )
    def test_invalid_sha256_rejected(self, store: BlobStore, bad: str) -> None:
        with pytest.raises(ValueError):
            store.put(bad, io.BytesIO(b"x"))
        with pytest.raises(ValueError):
            store.open(bad)
        with pytest.raises(ValueError):
            store.stat(bad)
        with pytest.raises(ValueError):
            store.delete(bad)
        assert list(store.iter_blobs()) == []

    # -- maintenance ------------------------------------------------------------------

    def test_clean_stale_uploads(self, store: BlobStore) -> None:
        data = b"kept"
        store.put_bytes(sha(data), data)
        if not self.make_abandoned_upload(store):
            assert store.clean_stale_uploads(0) == 0
        else:
            assert store.clean_stale_uploads(0) >= 1
            assert store.clean_stale_uploads(0) == 0
        assert [i.sha256 for i in store.iter_blobs()] == [sha(data)]
        assert store.read_bytes(sha(data)) == data

    def test_check_available_and_close(self, store: BlobStore) -> None:
        store.check_available()

    def test_serving_helpers(self, store: BlobStore) -> None:
        data = b"served"
        store.put_bytes(sha(data), data)
        url = store.presigned_get_url(sha(data))
        assert url is None or url.startswith("http")
        path = store.local_path(sha(data))
        if path is not None:
            assert path.read_bytes() == data
