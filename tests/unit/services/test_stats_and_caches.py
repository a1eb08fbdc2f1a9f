"""Totals, and the caches a context keeps between calls."""

from __future__ import annotations

import pytest

from registry.services import deletes, stats
from registry.services.caches import Expiring, LruCache
from registry.services.context import RegistryContext
from tests.helpers import carton_toml, make_carton


def test_totals_count_logical_and_stored_bytes(ctx, push) -> None:
    assert stats.get_stats(ctx) == {
        "models": 0,
        "cartons": 0,
        "blobs": 0,
        "logical_bytes": 0,
        "stored_bytes": 0,
        "dedup_ratio": None,
    }
    shared = b"s" * 1000
    push(make_carton({"w/a": shared, "w/b": shared}, model_name="m"))  # one blob, twice
    toml = len(carton_toml("m"))
    totals = stats.get_stats(ctx)
    assert (totals["models"], totals["cartons"], totals["blobs"]) == (1, 1, 2)
    assert totals["logical_bytes"] == 2 * len(shared) + toml
    assert totals["stored_bytes"] == len(shared) + toml
    assert totals["dedup_ratio"] == pytest.approx(totals["logical_bytes"] / totals["stored_bytes"])


def test_cached_totals_follow_this_contexts_own_writes(ctx, push) -> None:
    def cached() -> dict:
        with ctx.sessions() as session:
            return stats.cached_stats(ctx, session)

    assert cached()["cartons"] == 0
    push(make_carton({"w": b"1"}, model_name="m"))
    assert cached()["cartons"] == 1  # the push changed the generation
    deletes.delete_model(ctx, "m")
    assert cached()["cartons"] == 0


def test_each_context_has_its_own_caches_and_observers(ctx) -> None:
    other = RegistryContext.open(ctx.settings)
    try:
        assert other.caches is not ctx.caches and other.observers is not ctx.observers
        ctx.caches.facts.small_blobs.put("k", b"v")
        assert other.caches.facts.small_blobs.get("k") is None
    finally:
        other.close()


def test_lru_cache_is_bounded_by_weight_and_keeps_recent_entries() -> None:
    cache: LruCache[str, bytes] = LruCache(10, weigh=len)
    cache.put("a", b"aaaa")
    cache.put("b", b"bbbb")
    assert cache.get("a") == b"aaaa"  # now the most recent
    cache.put("c", b"cccc")  # 12 > 10: the least recent ("b") goes
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (b"aaaa", None, b"cccc")
    cache.put("huge", b"x" * 11)  # heavier than the whole cache: not kept, nothing evicted
    assert cache.get("huge") is None and cache.get("a") == b"aaaa"
    cache.drop("a")
    assert cache.get("a") is None


def test_expiring_value_needs_the_same_key_and_youth() -> None:
    value: Expiring[str] = Expiring(ttl=60)
    assert value.get(1) is None
    value.put(1, "one")
    assert value.get(1) == "one" and value.get(2) is None
    assert Expiring(ttl=0).get(1) is None
    stale: Expiring[str] = Expiring(ttl=0)
    stale.put(1, "gone at once")
    assert stale.get(1) is None
