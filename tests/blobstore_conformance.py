"""One conformance suite for every BlobStore backend (after zarr-python's ``StoreTests``).

Subclass ``BlobStoreConformance`` in a test module, provide a ``store`` fixture
(function scope, an empty store) and the out-of-band hooks, which reach the backend
directly, bypassing the interface, at the documented key layout (``layout_key`` for a
blob, ``pack_layout_key`` for a pack; ``tests/rawstore.py`` has them for our backends):

- ``raw_get(store, key)``: the bytes stored under that key, or None;
- ``raw_set(store, key, data)``: write ``data`` under that key, unchecked;
- ``incomplete_uploads(store)``: the uploads in progress or abandoned (temp files,
  incomplete multipart uploads), so that an aborted write is seen to leave none.

So the tests check what the interface wrote, and read what was written behind its
back (restored backups, rsync-ed folders, a disk that rots). Optional hooks:

- ``large_size``: bytes for the "larger than a part" test (default ~12 MiB)
- ``pack_large_size``: bytes of a pack written in several parts (default ~17 MiB)
- ``make_abandoned_upload(store)``: leave an incomplete upload behind, older
  than any cutoff; return True, or False if the backend has no such thing
- ``created_exactly_once``: whether concurrent puts report created=True once
- ``upload_ages_known``: whether the backend tells a fresh upload from an old one
"""

from __future__ import annotations

import abc
import hashlib
import io
import os
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from registry.blobstore import BlobDigestMismatch, BlobInfo, BlobNotFound, BlobStore, PutResult
from registry.blobstore.base import PackInfo, PackWriter, new_pack_name
from registry.blobstore.errors import BlobStoreUnavailable, PackNotFound
from tests.rawstore import layout_key, pack_layout_key

MiB = 1024 * 1024


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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
    pack_large_size: int = 17 * MiB + 4321
    upload_ages_known: bool = True
    created_exactly_once: bool = True

    @abc.abstractmethod
    def raw_get(self, store: BlobStore, key: str) -> bytes | None:
        """The bytes under ``key``, read from the backend directly."""

    @abc.abstractmethod
    def raw_set(self, store: BlobStore, key: str, data: bytes) -> None:
        """Write ``data`` under ``key`` directly, without any check."""

    @abc.abstractmethod
    def incomplete_uploads(self, store: BlobStore) -> list[str]:
        """Uploads in progress or abandoned, seen from the backend directly."""

    def make_abandoned_upload(self, store: BlobStore) -> bool:
        return False

    # -- out of band: what the interface wrote, and what it reads -----------------------

    def test_put_writes_the_bytes_under_the_layout_key(self, store: BlobStore) -> None:
        small, large = b"small blob", os.urandom(self.large_size)
        assert self.raw_get(store, layout_key(sha(small))) is None
        store.put_bytes(sha(small), small)
        store.put(sha(large), TrickleStream(large))
        assert self.raw_get(store, layout_key(sha(small))) == small
        assert self.raw_get(store, layout_key(sha(large))) == large

    def test_reads_what_was_written_behind_its_back(self, store: BlobStore) -> None:
        data = bytes(range(256)) * 50
        h = sha(data)
        self.raw_set(store, layout_key(h), data)
        assert store.exists(h) and store.stat(h) == len(data)
        assert store.exists_many([h, sha(b"other")]) == {h}
        assert store.read_bytes(h) == data
        assert store.read_bytes(h, 100, 300) == data[100:300]
        assert [(i.sha256, i.size) for i in store.iter_blobs()] == [(h, len(data))]

    def test_reads_do_not_verify_bytes(self, store: BlobStore) -> None:
        """A blob that rotted on disk is served as it is: finding it is fsck's job."""
        h = sha(b"original")
        self.raw_set(store, layout_key(h), b"rotten")
        assert store.stat(h) == len(b"rotten")
        assert store.read_bytes(h) == b"rotten"

    def test_put_keeps_a_blob_that_is_already_there(self, store: BlobStore) -> None:
        data = b"restored from a backup"
        self.raw_set(store, layout_key(sha(data)), data)
        assert store.put_bytes(sha(data), data) == PutResult(sha(data), len(data), False)
        assert self.raw_get(store, layout_key(sha(data))) == data

    def test_put_with_replace_replaces_a_rotten_blob(self, store: BlobStore) -> None:
        """A blob found damaged is written again over its rotten object, atomically."""
        small, large = b"rotted on disk", os.urandom(self.large_size)
        for data in (small, large):
            key = layout_key(sha(data))
            self.raw_set(store, key, b"rotten" + data[6:])
            assert store.put_bytes(sha(data), data).created is False  # the existing one wins
            assert self.raw_get(store, key) != data
            put = store.put(sha(data), TrickleStream(data), replace=True)
            assert put == PutResult(sha(data), len(data), True)
            assert self.raw_get(store, key) == data
            assert store.read_bytes(sha(data)) == data and store.stat(sha(data)) == len(data)
        assert sorted(i.sha256 for i in store.iter_blobs()) == sorted([sha(small), sha(large)])
        assert self.incomplete_uploads(store) == []

    def test_a_refused_replace_keeps_the_stored_object(self, store: BlobStore) -> None:
        data = b"the stored object"
        self.raw_set(store, layout_key(sha(data)), b"rotten")
        with pytest.raises(BlobDigestMismatch):
            store.put(sha(data), io.BytesIO(b"an impostor"), replace=True)
        assert self.raw_get(store, layout_key(sha(data))) == b"rotten"
        assert self.incomplete_uploads(store) == []

    def test_replace_of_an_absent_blob_creates_it(self, store: BlobStore) -> None:
        data = b"nothing was there"
        assert store.put(sha(data), io.BytesIO(data), replace=True).created is True
        assert self.raw_get(store, layout_key(sha(data))) == data

    def test_delete_removes_what_was_set_behind_its_back(self, store: BlobStore) -> None:
        data = b"set out of band"
        self.raw_set(store, layout_key(sha(data)), data)
        assert store.delete(sha(data)) is True
        assert self.raw_get(store, layout_key(sha(data))) is None

    def test_a_refused_put_writes_nothing_anywhere(self, store: BlobStore) -> None:
        data = os.urandom(self.large_size)
        claimed = sha(b"claimed")
        with pytest.raises(BlobDigestMismatch):
            store.put(claimed, TrickleStream(data))
        assert self.raw_get(store, layout_key(claimed)) is None
        assert self.raw_get(store, layout_key(sha(data))) is None

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

    # -- packs ---------------------------------------------------------------------------

    def write_pack(self, store: BlobStore, data: bytes, piece: int = 700_001) -> PackWriter:
        """A pack of ``data`` appended in irregular pieces, not committed yet."""
        writer = store.new_pack(new_pack_name())
        at, n = 0, 0
        while at < len(data):
            size = max(1, piece - (n % 5) * 99_991)
            writer.write(data[at : at + size])
            at, n = at + size, n + 1
        assert writer.size == len(data)
        return writer

    def assert_no_pack(self, store: BlobStore, name: str) -> None:
        assert self.raw_get(store, pack_layout_key(name)) is None
        assert store.pack_size(name) is None
        assert name not in {p.name for p in store.iter_packs()}
        with pytest.raises(PackNotFound):
            store.open_pack(name)

    @pytest.mark.parametrize("size", [1, 300_000, "large"])
    def test_a_pack_is_published_by_commit_and_not_before(
        self, store: BlobStore, size: int | str
    ) -> None:
        data = os.urandom(self.pack_large_size if size == "large" else int(size))
        before = datetime.now(UTC) - timedelta(minutes=5)
        writer = self.write_pack(store, data)
        self.assert_no_pack(store, writer.name)
        writer.commit()
        assert self.raw_get(store, pack_layout_key(writer.name)) == data
        assert store.pack_size(writer.name) == len(data)
        assert store.read_pack(writer.name, 0, len(data)) == data
        (info,) = store.iter_packs()
        assert isinstance(info, PackInfo) and (info.name, info.size) == (writer.name, len(data))
        assert info.modified.utcoffset() == timedelta(0)
        assert before <= info.modified <= datetime.now(UTC) + timedelta(minutes=5)
        assert self.incomplete_uploads(store) == []
        assert list(store.iter_blobs()) == []  # packs and blobs are apart

    @pytest.mark.parametrize("size", [300_000, "large"])
    def test_an_aborted_pack_leaves_nothing(self, store: BlobStore, size: int | str) -> None:
        data = os.urandom(self.pack_large_size if size == "large" else int(size))
        writer = self.write_pack(store, data)
        writer.abort()
        self.assert_no_pack(store, writer.name)
        assert self.incomplete_uploads(store) == []
        assert list(store.iter_packs()) == []
        # and the store still works afterwards
        again = self.write_pack(store, data)
        again.commit()
        assert store.read_pack(again.name, len(data) - 5, len(data)) == data[-5:]

    def test_reading_any_range_of_a_pack(self, store: BlobStore) -> None:
        large, small = os.urandom(self.pack_large_size), os.urandom(100_000)
        big_pack, small_pack = self.write_pack(store, large), self.write_pack(store, small)
        big_pack.commit()
        small_pack.commit()
        packs = {big_pack.name: large, small_pack.name: small}
        a, b = big_pack.name, small_pack.name

        def read(name: str, start: int = 0, end: int | None = None) -> bytes:
            with store.open_pack(name, start, end) as f:
                return f.read()

        assert read(b) == small and read(b, 0, None) == small
        assert read(b, 10, 20) == small[10:20]
        assert read(b, 99_999) == small[-1:]
        assert read(b, 5, 5) == b"" and read(b, len(small)) == b""
        assert read(b, 90_000, 200_000) == small[90_000:]  # clamped, as for blobs
        with store.open_pack(b, 10, 20) as f:
            assert f.read(3) == small[10:13]
            assert f.read(100) == small[13:20]
            assert f.read(1) == b""
        assert store.read_pack(b, 95_000, 200_000) == small[95_000:]

        rng = random.Random(1234)
        ranges = [(a, 0, len(large)), (b, 0, 0), (b, 7, 8), (a, 5 * MiB - 3, 13 * MiB + 7)]
        for _ in range(20):
            name = rng.choice([a, b])
            lo = rng.randrange(len(packs[name]))
            ranges.append((name, lo, rng.randint(lo, len(packs[name]))))
        expected = b"".join(packs[name][lo:hi] for name, lo, hi in ranges)
        for name, lo, hi in ranges[-6:]:
            assert store.read_pack(name, lo, hi) == packs[name][lo:hi]
            assert read(name, lo, hi) == packs[name][lo:hi]
        pieces = list(store.iter_pack_ranges(ranges, chunk_size=65_537))
        assert b"".join(pieces) == expected
        assert max(len(p) for p in pieces) <= 65_537
        assert b"".join(store.iter_pack_ranges(iter(ranges))) == expected  # a generator

    def test_a_range_past_the_end_of_a_pack_is_a_lost_pack(self, store: BlobStore) -> None:
        """The index says the bytes are there: a pack shorter than that lost data."""
        writer = self.write_pack(store, os.urandom(1000))
        writer.commit()
        with pytest.raises(PackNotFound) as info:
            list(store.iter_pack_ranges([(writer.name, 0, 10), (writer.name, 990, 1001)]))
        assert info.value.name == writer.name

    def test_a_missing_pack_is_pack_not_found(self, store: BlobStore) -> None:
        name = new_pack_name()
        with pytest.raises(PackNotFound) as info:
            store.open_pack(name)
        assert info.value.name == name and name in str(info.value)
        assert isinstance(info.value, BlobStoreUnavailable)  # data lost: not a 404
        with pytest.raises(PackNotFound):
            store.open_pack(name, 0, 0)
        with pytest.raises(PackNotFound):
            store.read_pack(name, 10, 20)
        with pytest.raises(PackNotFound):
            list(store.iter_pack_ranges([(name, 0, 10)]))
        assert store.pack_size(name) is None
        assert store.delete_pack(name) is False

    def test_pack_size_iter_packs_and_delete_pack(self, store: BlobStore) -> None:
        assert list(store.iter_packs()) == []
        sizes = {}
        for size in (10, 2000, 70_000):
            writer = self.write_pack(store, os.urandom(size))
            writer.commit()
            sizes[writer.name] = size
        store.put_bytes(sha(b"a blob"), b"a blob")
        assert {p.name: p.size for p in store.iter_packs()} == sizes
        assert {n: store.pack_size(n) for n in sizes} == sizes
        gone = sorted(sizes)[0]
        assert store.delete_pack(gone) is True
        assert store.delete_pack(gone) is False
        self.assert_no_pack(store, gone)
        assert {p.name for p in store.iter_packs()} == set(sizes) - {gone}
        assert [b.sha256 for b in store.iter_blobs()] == [sha(b"a blob")]

    def test_reads_a_pack_written_behind_its_back(self, store: BlobStore) -> None:
        name, data = new_pack_name(), os.urandom(5000)
        self.raw_set(store, pack_layout_key(name), data)
        assert store.pack_size(name) == len(data)
        assert [(p.name, p.size) for p in store.iter_packs()] == [(name, len(data))]
        assert store.read_pack(name, 100, 300) == data[100:300]
        assert b"".join(store.iter_pack_ranges([(name, 4000, 5000)])) == data[4000:]
        assert store.delete_pack(name) is True
        assert self.raw_get(store, pack_layout_key(name)) is None

    @pytest.mark.parametrize(
        "bad", ["", "abc", "A" * 32, "g" * 32, "0" * 31, "0" * 33, "../" + "0" * 29, sha(b"x")]
    )
    def test_invalid_pack_names_rejected(self, store: BlobStore, bad: str) -> None:
        for call in (
            store.new_pack,
            store.open_pack,
            store.pack_size,
            store.delete_pack,
            lambda name: list(store.iter_pack_ranges([(name, 0, 1)])),
        ):
            with pytest.raises(ValueError):
                call(bad)
        assert list(store.iter_packs()) == []

    def test_invalid_pack_ranges(self, store: BlobStore) -> None:
        writer = self.write_pack(store, b"x" * 100)
        writer.commit()
        with pytest.raises(ValueError):
            store.open_pack(writer.name, -1)
        with pytest.raises(ValueError):
            store.open_pack(writer.name, 10, 5)

    def test_concurrent_pack_writers(self, store: BlobStore) -> None:
        datas = [os.urandom(self.pack_large_size // 2 + i) for i in range(3)]
        barrier = threading.Barrier(len(datas))

        def write(data: bytes) -> str:
            barrier.wait(timeout=30)
            writer = self.write_pack(store, data, piece=1_000_003)
            writer.commit()
            return writer.name

        with ThreadPoolExecutor(len(datas)) as pool:
            names = list(pool.map(write, datas))
        assert {p.name: p.size for p in store.iter_packs()} == {
            n: len(d) for n, d in zip(names, datas, strict=True)
        }
        for name, data in zip(names, datas, strict=True):
            assert self.raw_get(store, pack_layout_key(name)) == data
        assert self.incomplete_uploads(store) == []

    def test_clean_stale_uploads_removes_an_abandoned_pack_upload(self, store: BlobStore) -> None:
        kept = self.write_pack(store, b"a published pack")
        kept.commit()
        abandoned = self.write_pack(store, os.urandom(self.pack_large_size))  # a crashed push
        in_progress = self.incomplete_uploads(store)
        if self.upload_ages_known:
            assert store.clean_stale_uploads(3600) == 0  # still being written, for all it knows
            assert self.incomplete_uploads(store) == in_progress
        assert store.clean_stale_uploads(0) == len(in_progress)
        assert self.incomplete_uploads(store) == []
        self.assert_no_pack(store, abandoned.name)
        abandoned.abort()  # the writer coming back to it finds nothing to undo
        assert [p.name for p in store.iter_packs()] == [kept.name]
        assert store.read_pack(kept.name, 0, 16) == b"a published pack"
