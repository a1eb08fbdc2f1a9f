"""Chunk-level savings on the pages, both backend pairs: what each version shares with
the previous one (model pages), what chunk dedup saves beyond file dedup (/stats).

The expected figures are computed here from the files' chunks, cut as the registry cuts
them; the registry computes them from its segments. They must agree to the byte.
"""

from __future__ import annotations

import contextlib
import html
import random
import re
from collections.abc import Iterator

from sqlalchemy import event

from registry.chunking import chunk_hash, iter_chunks
from registry.humanize import human_bytes, percent
from registry.services.chunk_savings import version_shares
from registry.services.gc import collect_garbage
from registry.services.models import get_model_row, model_json
from registry.services.storage_accounting import model_storage
from tests.helpers import carton_toml
from tests.integration.chunks.helpers import push, stats, weights_carton
from tests.integration.web.conftest import BROWSER

MiB = 1024 * 1024
_rng = random.Random(8)
WEIGHTS = _rng.randbytes(MiB)
VARIANT = WEIGHTS[:400_000] + _rng.randbytes(100_000) + WEIGHTS[400_000:]
CONFIG = b'{"layers": 12}'


def chunks(ctx, data: bytes) -> list[bytes]:
    return list(iter_chunks(ctx.chunk_params, iter([data])))


def expected_share(ctx, previous: dict[str, bytes], current: dict[str, bytes]) -> tuple[int, int]:
    """(bytes of ``current``'s distinct files already in ``previous``, its bytes), by chunks."""
    threshold = ctx.settings.chunk_min_file_bytes
    old = set(previous.values())
    old_chunks = {chunk_hash(c) for d in old if len(d) > threshold for c in chunks(ctx, d)}
    shared = total = 0
    for data in set(current.values()):
        total += len(data)
        if data in old:
            shared += len(data)
        elif len(data) > threshold:
            shared += sum(len(c) for c in chunks(ctx, data) if chunk_hash(c) in old_chunks)
    return shared, total


def files(model: str, weights: bytes, **more: bytes) -> dict[str, bytes]:
    """A version's files as the registry holds them (carton.toml included)."""
    return {"carton.toml": carton_toml(model), "weights": weights, **more}


def page(client, url: str) -> str:
    response = client.get(url, headers=BROWSER)
    assert response.status_code == 200, response.text[:500]
    return html.unescape(response.text)


def shares_of(ctx, model: str) -> dict[int, tuple[int, int, int]]:
    """Version -> (previous version, shared bytes, bytes), as the model page computes them."""
    with ctx.sessions() as session:
        listed = model_json(session, get_model_row(session, model))["versions"]
        found = version_shares(ctx, session, listed)
    return {n: (s.previous, s.shared_bytes, s.total_bytes) for n, s in found.items()}


@contextlib.contextmanager
def counting_queries(ctx) -> Iterator[list[str]]:
    statements: list[str] = []

    def count(conn, cursor, statement, *args) -> None:  # type: ignore[no-untyped-def]
        statements.append(statement)

    event.listen(ctx.engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(ctx.engine, "before_cursor_execute", count)


def test_each_version_shows_what_it_shares_with_the_previous_one(client, registry_ctx):
    v1 = files("ft", WEIGHTS, config=CONFIG)
    v2 = files("ft", VARIANT, config=CONFIG)
    v3 = files("ft", VARIANT, config=b'{"layers": 13}')
    for version in (v1, v2, v3):
        push(client, weights_carton(version["weights"], "ft", **{"config.json": version["config"]}))

    one_two, two_three = expected_share(registry_ctx, v1, v2), expected_share(registry_ctx, v2, v3)
    assert 0.6 * one_two[1] < one_two[0] < one_two[1]  # the insert and its neighbours differ
    assert two_three == (two_three[1] - len(CONFIG), two_three[1])  # only the config differs
    assert shares_of(registry_ctx, "ft") == {2: (1, *one_two), 3: (2, *two_three)}

    text = page(client, "/models/ft")
    shown = 100.0 * two_three[0] / two_three[1]
    assert f"v3 shares {percent(shown)} of its bytes with v2" in text
    assert f"({human_bytes(two_three[0])} of {human_bytes(two_three[1])})" in text
    listed = re.findall(r'class="version-share"[^>]*>([^<]*)<', text)
    assert listed == [
        f"shares {percent(shown)} with v2",
        f"shares {percent(100.0 * one_two[0] / one_two[1])} with v1",
    ]
    assert "of its bytes with" not in page(client, "/models/ft?version=1")  # it has no previous

    # a version deleted in between: v3's previous is v1 now
    assert client.delete("/api/v1/models/ft/versions/2").status_code == 200
    assert shares_of(registry_ctx, "ft") == {3: (1, *expected_share(registry_ctx, v1, v3))}
    assert "of its bytes with v1" in page(client, "/models/ft")


def test_shares_survive_gc_rewriting_the_packs(client, registry_ctx):
    """v2 and v3 share chunks first stored by v1; deleting v1 rewrites its pack."""
    kept = _rng.randbytes(300_000)
    weights = [kept + _rng.randbytes(size) for size in (2 * MiB, 200_000, 400_000)]
    for data in weights:
        push(client, weights_carton(data, "gcm"))
    v2, v3 = files("gcm", weights[1]), files("gcm", weights[2])
    before = shares_of(registry_ctx, "gcm")[3]
    assert before == (2, *expected_share(registry_ctx, v2, v3)) and before[1] > 200_000
    assert client.delete("/api/v1/models/gcm/versions/1").status_code == 200
    assert collect_garbage(registry_ctx, grace_seconds=0).packs.packs_rewritten == 1
    collect_garbage(registry_ctx, grace_seconds=0)
    registry_ctx.caches.version_shares.clear()
    assert shares_of(registry_ctx, "gcm")[3] == before


def test_the_queries_for_the_shares_do_not_grow_with_the_versions(client, registry_ctx):
    def cold_page(model: str) -> int:
        registry_ctx.caches.version_shares.clear()
        with counting_queries(registry_ctx) as statements:
            page(client, f"/models/{model}")
        return len(statements)

    for n in range(2):
        push(client, weights_carton(VARIANT[: MiB - n * 1000], "few"))
    for n in range(8):
        push(client, weights_carton(VARIANT[: MiB - n * 1000], "many"))
    # What pages keep per index generation (the generation itself, the private namespaces,
    # each carton's facts) is read now and trusted for a minute, not 50 ms: only the
    # page's own queries are counted, however loaded the machine.
    registry_ctx.caches.facts.trust_seconds = 60.0
    page(client, "/models/few")
    page(client, "/models/many")
    assert cold_page("few") == cold_page("many")
    with counting_queries(registry_ctx) as warm:
        page(client, "/models/many")
    assert len(warm) == cold_page("many") - 2  # the two chunk_savings queries, cached now


def test_stats_show_what_chunk_dedup_saves_beyond_file_dedup(client, registry_ctx):
    push(client, weights_carton(WEIGHTS, "ft"))
    push(client, weights_carton(VARIANT, "ft"))
    push(client, weights_carton(VARIANT, "copy"))  # file dedup: the same file again
    totals = stats(client)
    distinct = len(WEIGHTS) + len(VARIANT) + len(carton_toml("ft")) + len(carton_toml("copy"))
    chunk_saved = distinct - totals["stored_bytes"]
    assert chunk_saved > 0.7 * len(VARIANT)
    text = " ".join(re.sub(r"<[^>]+>", " ", page(client, "/stats")).split())  # the words
    section = text[text.index("Where the savings come from") :]
    assert f"{human_bytes(totals['logical_bytes'] - distinct)} saved by storing each" in section
    assert f"{human_bytes(distinct)} of distinct files" in section
    assert f"{human_bytes(chunk_saved)} saved beyond that by chunk dedup" in section
    assert f"({percent(100.0 * chunk_saved / distinct)} of the distinct files" in section


def test_stats_count_a_models_own_and_shared_bytes_at_chunk_level(client, registry_ctx):
    """A fine-tune and its base share their common chunks, not their whole sizes."""
    solo = _rng.randbytes(MiB)
    push(client, weights_carton(WEIGHTS, "ft"))
    push(client, weights_carton(VARIANT, "ft"))
    push(client, weights_carton(VARIANT, "copy"))
    push(client, weights_carton(solo, "solo"))

    def chunk_bytes(*datas: bytes) -> dict[str, int]:
        return {chunk_hash(c): len(c) for d in datas for c in chunks(registry_ctx, d)}

    variant, both = chunk_bytes(VARIANT), chunk_bytes(WEIGHTS, VARIANT)
    toml = {name: len(carton_toml(name)) for name in ("ft", "copy", "solo")}
    expected = {
        "ft": (
            sum(n for h, n in both.items() if h not in variant) + toml["ft"],
            sum(variant.values()),
            sum(both.values()) + toml["ft"],
        ),
        "copy": (toml["copy"], sum(variant.values()), sum(variant.values()) + toml["copy"]),
        "solo": (len(solo) + toml["solo"], 0, len(solo) + toml["solo"]),
    }
    with registry_ctx.sessions() as session:
        found = model_storage(session)
    assert {m["name"]: (m["exclusive"], m["shared"], m["total"]) for m in found["exclusive"]} == (
        expected
    )
    assert sorted(m["name"] for m in found["top_sharing"]) == ["copy", "ft"]  # solo shares none
    # what the models use, each byte once, is what the store holds
    owned = sum(e for e, _, _ in expected.values()) + sum(variant.values())
    assert owned == stats(client)["stored_bytes"]
