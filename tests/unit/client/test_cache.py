"""The client's local cache: chunks checked on every read, LRU trimming, verified cartons."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from registry.chunking import chunk_hash
from registry.client import ClientError
from registry.client.cache import (
    DEFAULT_MAX_BYTES,
    MAX_BYTES_ENV,
    VERIFIED_KEPT,
    ChunkCache,
    VerifiedCartons,
    cache_dir,
    max_cache_bytes,
)


def put(cache: ChunkCache, data: bytes) -> str:
    name = chunk_hash(data)
    cache.put(name, data)
    return name


def test_a_chunk_put_is_read_back_and_counted(tmp_path):
    cache = ChunkCache(tmp_path, 1 << 20)
    name = put(cache, b"some chunk bytes")
    assert cache.has(name)
    assert cache.get(name) == b"some chunk bytes"
    assert (tmp_path / name[:2] / name).is_file()
    assert cache.added == len(b"some chunk bytes")
    put(cache, b"some chunk bytes")  # already there: not written, not counted again
    assert cache.added == len(b"some chunk bytes")
    assert cache.get(chunk_hash(b"never put")) is None


def test_a_damaged_chunk_is_dropped_not_returned(tmp_path):
    cache = ChunkCache(tmp_path, 1 << 20)
    name = put(cache, b"x" * 1000)
    path = tmp_path / name[:2] / name
    path.write_bytes(b"x" * 999 + b"y")
    assert cache.get(name) is None
    assert not path.exists()


def test_trim_evicts_the_least_recently_used_first(tmp_path):
    cache = ChunkCache(tmp_path, 2500)
    names = [put(cache, bytes([i]) * 1000) for i in range(4)]
    for age, name in enumerate(reversed(names)):  # names[0] oldest
        os.utime(tmp_path / name[:2] / name, (1000 - age * 100, 1000 - age * 100))
    assert cache.get(names[0]) is not None  # read: now the most recent
    assert cache.trim() == 2000
    assert [cache.has(n) for n in names] == [True, False, False, True]
    assert cache.trim() == 0


def test_trim_of_a_cache_never_written(tmp_path):
    assert ChunkCache(tmp_path / "none", 0).trim() == 0


def test_the_cache_folder_follows_the_platform(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path
    assert ChunkCache.default().root == tmp_path / "carton-registry" / "chunks"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setattr(sys, "platform", "darwin")
    assert cache_dir() == Path.home() / "Library" / "Caches"
    monkeypatch.setattr(sys, "platform", "linux")
    assert cache_dir() == Path.home() / ".cache"


def test_the_size_cap_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(MAX_BYTES_ENV, raising=False)
    assert max_cache_bytes() == DEFAULT_MAX_BYTES == 10 << 30
    monkeypatch.setenv(MAX_BYTES_ENV, "123456")
    assert max_cache_bytes() == 123456
    monkeypatch.setenv(MAX_BYTES_ENV, "10GB")
    with pytest.raises(ClientError, match=MAX_BYTES_ENV):
        max_cache_bytes()


def test_a_carton_is_verified_only_while_unchanged(tmp_path):
    verified = VerifiedCartons(tmp_path / "cache" / "verified.json")
    carton = tmp_path / "a.carton"
    carton.write_bytes(b"zip bytes")
    assert not verified.verified(carton, "m1")
    verified.remember(carton, "m1", verified.state(carton))
    assert verified.verified(carton, "m1")
    assert not verified.verified(carton, "m2")
    carton.write_bytes(b"zip bytez")  # same size, new content: new mtime and ctime
    assert not verified.verified(carton, "m1")


def test_a_carton_rewritten_while_it_was_pushed_is_not_remembered(tmp_path):
    """What is remembered is the file as it was before its members were read."""
    verified = VerifiedCartons(tmp_path / "verified.json")
    carton = tmp_path / "a.carton"
    carton.write_bytes(b"zip bytes")
    before = verified.state(carton)
    assert before is not None
    carton.write_bytes(b"zip bytez")  # rewritten during the push
    verified.remember(carton, "m1", before)
    assert not verified.verified(carton, "m1")
    assert verified.state(tmp_path / "gone.carton") is None


def test_only_the_latest_verified_cartons_are_kept(tmp_path):
    verified = VerifiedCartons(tmp_path / "verified.json")
    cartons = []
    for i in range(VERIFIED_KEPT + 1):
        carton = tmp_path / f"{i}.carton"
        carton.write_bytes(b"%d" % i)
        verified.remember(carton, f"m{i}", verified.state(carton))
        cartons.append(carton)
    assert not verified.verified(cartons[0], "m0")
    assert verified.verified(cartons[-1], f"m{VERIFIED_KEPT}")


def test_remembering_the_newest_entry_again_writes_nothing(tmp_path):
    """A re-push of the last carton pushed leaves the record as it is; another carton
    pushed in between moves it back to the end (the oldest are forgotten first)."""
    record = tmp_path / "verified.json"
    verified = VerifiedCartons(record)
    a, b = tmp_path / "a.carton", tmp_path / "b.carton"
    a.write_bytes(b"a")
    b.write_bytes(b"b")
    verified.remember(a, "ma", verified.state(a))
    written = record.stat()
    verified.remember(a, "ma", verified.state(a))
    assert record.stat().st_ino == written.st_ino  # not replaced by a new file
    assert record.stat().st_mtime_ns == written.st_mtime_ns
    verified.remember(b, "mb", verified.state(b))
    verified.remember(a, "ma", verified.state(a))
    assert list(json.loads(record.read_text()).values()) == ["mb", "ma"]
    verified.remember(a, "ma2", verified.state(a))  # same file, another manifest: written
    assert verified.verified(a, "ma2") and not verified.verified(a, "ma")


def test_an_unreadable_record_counts_as_nothing_verified(tmp_path):
    record = tmp_path / "verified.json"
    record.write_text("[not, json")
    carton = tmp_path / "a.carton"
    carton.write_bytes(b"zip")
    assert not VerifiedCartons(record).verified(carton, "m")
    VerifiedCartons(record).remember(carton, "m", VerifiedCartons(record).state(carton))
    assert VerifiedCartons(record).verified(carton, "m")


def test_a_transfer_larger_than_the_cap_trims_as_it_goes(tmp_path, monkeypatch):
    """Not only at the end: a pull of many times the cap keeps the cache near it."""
    from registry.client import cache as client_cache

    monkeypatch.setattr(client_cache, "TRIM_EVERY_MIN", 0)
    chunks = ChunkCache(tmp_path / "chunks", max_bytes=400_000)  # trims every 100,000 bytes
    for i in range(40):
        chunks.put(f"{i:064x}", bytes(50_000))
        on_disk = sum(p.stat().st_size for p in (tmp_path / "chunks").rglob("*") if p.is_file())
        assert on_disk <= 400_000 + 100_000
    assert chunks.added == 40 * 50_000
    assert chunks.has(f"{39:064x}")  # the newest are kept
