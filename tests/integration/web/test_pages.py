"""Server-rendered pages on every backend pair: content, search, sort, paging, safety, errors."""

from __future__ import annotations

import html
import os
import re

from sqlalchemy import update

from registry.db.tables import Model
from tests.conftest import fixture_carton
from tests.integration.web.conftest import (
    BROWSER,
    manifest_entries,
    manifest_sha256,
    small_model,
    with_carton_toml,
)


def push(client, data) -> dict:
    body = data.read_bytes() if hasattr(data, "read_bytes") else data
    response = client.post("/api/v1/cartons", content=body)
    assert response.status_code in (200, 201), response.text
    return response.json()


def page(client, url: str, status: int = 200) -> str:
    response = client.get(url, headers=BROWSER)
    assert response.status_code == status, response.text[:2000]
    assert response.headers["content-type"].startswith("text/html")
    return response.text


def model_names(text: str) -> list[str]:
    return [html.unescape(n) for n in re.findall(r'class="model-name" href="[^"]*">([^<]*)<', text)]


def test_listing_shows_models_and_totals(client):
    push(client, fixture_carton("02"))
    push(client, fixture_carton("03"))
    text = page(client, "/")
    assert model_names(text) == ["misc_and_strings", "selftest_identity"]
    assert "Identity model with self tests and numeric tensor_data" in text
    assert "Carton with misc files and string tensors" in text
    assert "noop" in text and "v1" in text
    assert re.search(r'stat-value">2</span><span class="stat-label">models', text)
    assert re.search(r'stat-value">2</span><span class="stat-label">cartons', text)
    assert "saved by dedup" in text
    assert 'href="/models/selftest_identity"' in text
    assert 'href="/static/style.css' in text
    css = client.get("/static/style.css")
    assert css.status_code == 200 and "text/css" in css.headers["content-type"]


def test_listing_totals_follow_pushes_and_deletes(client):
    """The header totals are cached briefly, but never across this process's own writes."""
    assert re.search(r'stat-value">0</span><span class="stat-label">models', page(client, "/"))
    push(client, fixture_carton("02"))
    assert re.search(r'stat-value">1</span><span class="stat-label">cartons', page(client, "/"))
    response = client.delete("/api/v1/models/selftest_identity/versions/1")
    assert response.status_code == 200
    assert re.search(r'stat-value">0</span><span class="stat-label">cartons', page(client, "/"))


def test_search_sort_and_pagination(client, registry_ctx):
    for i, (name, desc, runner) in enumerate(
        [
            ("alpha-resnet", "Image classifier", "torchscript"),
            ("bravo-bert", "Text encoder for search", "python"),
            ("charlie-gpt", "Generates text", "python"),
            ("delta-xgb", "Tabular model", "xgboost"),
        ]
    ):
        push(client, small_model(name, f"{desc}\n\nmore lines {i}", runner))
    assert model_names(page(client, "/?q=text")) == ["bravo-bert", "charlie-gpt"]
    assert model_names(page(client, "/?q=PYTHON")) == ["bravo-bert", "charlie-gpt"]
    assert model_names(page(client, "/?q=delta")) == ["delta-xgb"]
    empty = page(client, "/?q=nothing-like-this")
    assert model_names(empty) == [] and "No model matches" in empty
    # the search box keeps the query
    assert 'value="text"' in page(client, "/?q=text")

    # recent: newest push first (make times distinct and explicit)
    from datetime import UTC, datetime, timedelta

    base = datetime(2024, 1, 1, tzinfo=UTC)
    with registry_ctx.transaction() as s:
        for i, name in enumerate(["charlie-gpt", "alpha-resnet", "delta-xgb", "bravo-bert"]):
            s.execute(
                update(Model).where(Model.name == name).values(updated_at=base + timedelta(hours=i))
            )
    assert model_names(page(client, "/?sort=recent")) == [
        "bravo-bert",
        "delta-xgb",
        "alpha-resnet",
        "charlie-gpt",
    ]
    assert 'aria-current="true">Recently pushed' in page(client, "/?sort=recent")

    # size: a bigger carton first
    push(client, fixture_carton("02"))
    assert model_names(page(client, "/?sort=size"))[0] == "selftest_identity"

    # pagination: follow "Next" links through pages of 2
    import registry.services.listing as listing

    old = listing.DEFAULT_PAGE
    listing.DEFAULT_PAGE = 2
    try:
        from registry.services import webviews

        webviews_default = webviews.listing.__kwdefaults__["limit"]
        webviews.listing.__kwdefaults__["limit"] = 2
        seen: list[str] = []
        url = "/?sort=name"
        while url:
            text = page(client, url)
            names = model_names(text)
            assert 1 <= len(names) <= 2
            seen += names
            nxt = re.search(r'rel="next" href="([^"]+)"', text)
            url = html.unescape(nxt.group(1)) if nxt else None
        assert seen == sorted(seen) and len(seen) == 5
    finally:
        listing.DEFAULT_PAGE = old
        webviews.listing.__kwdefaults__["limit"] = webviews_default


def test_bad_sort_and_cursor_are_html_400(client):
    text = page(client, "/?sort=weird", status=400)
    assert "invalid sort" in text and "Browse models" in text
    page(client, "/?cursor=%%%", status=400)


def test_model_page_fixture_02(client):
    body = push(client, fixture_carton("02"))
    sha = body["manifest_sha256"]
    text = page(client, "/models/selftest_identity")
    assert "selftest_identity" in text and "v1" in text
    assert "Returns its inputs unchanged." in text
    # inputs/outputs table
    for fragment in ("batch_size", "u_shape", "scalar", "input x", "float64", "uint8", "int64"):
        assert fragment in text, fragment
    # runner, framework, opts, platforms
    assert "=1.0.0" in text and "use_fast_path" in text and "eval" in text
    assert "x86_64-unknown-linux-gnu" in text and "aarch64-apple-darwin" in text
    # self tests and examples: tensors summarised by dtype/shape from index.toml
    assert "identity" in text and "outputs == inputs" in text and "ex1" in text
    assert re.search(r'class="dtype">float32</span> <span class="shape">\[2, 3\]', text)
    assert re.search(r'class="dtype">uint8</span> <span class="shape">\[1\]', text)
    # ... with the first values of small tensors, read from the store (issue 26, item 13)
    for values in ("[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]", "[1, -2, 3, -4]", "[3.5]", "[7]"):
        assert f'<code class="values">{values}</code>' in text, values
    # files with sizes and share counts; downloads, hash, snippet
    assert "model/sub/dir/weights.bin" in text and "tensor_data/index.toml" in text
    assert f'href="/cartons/{sha}.carton"' in text
    assert f'href="/cartons/{sha}.carton?form=full"' in text
    assert f'data-copy="{sha}"' in text and 'src="/static/copy.js' in text
    public = client.app.state.ctx.settings.public_url.rstrip("/")
    assert f'carton.load("{public}/cartons/{sha}.carton")' in html.unescape(text)
    assert "import cartonml as carton" in text
    assert "only here" in text


def test_model_page_versions_tags_and_shared_files(client):
    v1 = push(client, small_model("m", "first version"))
    v2 = push(client, small_model("m", "second version"))
    assert (v1["version"], v2["version"]) == (1, 2)
    text = page(client, "/models/m")
    assert "second version" in text and "first version" not in text
    assert 'href="/models/m?version=1"' in text and 'href="/models/m?version=2"' in text
    # the model files are shared with the other version
    assert "1 other carton" in text
    old = page(client, "/models/m?version=1")
    assert "first version" in old and "second version" not in old
    # the `latest` tag wins over the highest version
    r = client.put("/api/v1/models/m/tags/latest", json={"version": 1})
    assert r.status_code in (200, 201), r.text
    text = page(client, "/models/m")
    assert "first version" in text and 'badge-tag">latest' in text
    page(client, "/models/m?version=9", status=404)
    page(client, "/models/m?version=abc", status=400)


def test_misc_image_resolves_to_blob_url(client):
    push(client, fixture_carton("03"))
    entries = manifest_entries(fixture_carton("03"))
    diagram = entries["misc/diagram.png"]
    text = page(client, "/models/misc_and_strings")
    assert f'<img src="/blobs/{diagram}" alt="diagram"' in text
    # the example's misc input (a PNG without extension) is shown as an image too
    assert f'<img class="ref-img" src="/blobs/{entries["misc/_example_misc_file_0"]}"' in text
    # string tensors summarised
    assert re.search(r'class="dtype">string</span> <span class="shape">\[2, 2\]', text)
    assert "image example" in text


def test_description_is_rendered_safely(client):
    desc = "\n".join(
        [
            "# Title",
            "<script>alert(1)</script>",
            "[x](javascript:alert(1))",
            "![i](http://evil/x.png)",
            "<img src=x onerror=alert(1)>",
            "[ok](https://example.com/docs)",
            "[data](data:text/html;base64,PHNjcmlwdD4=)",
            "[rel](relative/path) ![missing](@misc/nope.png)",
            '<a href="javascript:alert(2)">raw</a>',
        ]
    )
    sha = push(client, small_model("evil", desc))["manifest_sha256"]
    for url in ("/models/evil", f"/cartons/{sha}"):
        text = page(client, url)
        start = text.index('<div class="markdown">')
        md = text[start : text.index("</section>", start)]
        assert "<script" not in md and "<img src=x" not in md
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md
        assert "&lt;img src=x onerror=alert(1)&gt;" in md
        assert "[x](javascript:alert(1))" in md  # literal, inert text
        assert '<a href="javascript' not in md and "onerror=alert(1)>" not in md
        hrefs = re.findall(r'(?:href|src)="([^"]*)"', md)
        assert hrefs == ["https://example.com/docs"], hrefs
        assert "<h1>Title</h1>" in md
        assert "http://evil/x.png" in md  # shown as inert text
        assert 'rel="nofollow noopener noreferrer"' in md


def test_carton_page_by_hash_including_unnamed(client):
    from backports.zstd import zipfile

    with zipfile.ZipFile(fixture_carton("01")) as z:
        toml = z.read("carton.toml")
    unnamed = with_carton_toml(fixture_carton("01"), toml)
    sha = push(client, unnamed)["manifest_sha256"]
    assert sha == manifest_sha256(unnamed)
    text = page(client, f"/cartons/{sha}")
    assert "Unnamed carton" in text and sha in text
    assert f'href="/cartons/{sha}.carton"' in text
    named = push(client, fixture_carton("02"))["manifest_sha256"]
    text = page(client, f"/cartons/{named}")
    assert 'href="/models/selftest_identity?version=1"' in text
    page(client, "/cartons/" + "0" * 64, status=404)
    page(client, "/cartons/not-a-hash", status=404)


def test_stats_page(client):
    push(client, fixture_carton("02"))
    push(client, fixture_carton("03"))
    push(client, small_model("a", "one"))
    push(client, small_model("b", "two"))
    text = page(client, "/stats")
    assert "logical bytes" in text and "stored bytes" in text and "dedup ratio" in text
    assert "Largest blobs" in text and "Freed by deleting a model" in text
    # a and b share fixture 01's model files: both appear among the top sharing models
    sharing = text[text.index("Models that share most") : text.index("Freed by deleting")]
    assert 'href="/models/a"' in sharing and 'href="/models/b"' in sharing
    exclusive = text[text.index("Freed by deleting") : text.index("Largest blobs")]
    for name in ("a", "b", "selftest_identity", "misc_and_strings"):
        assert f'href="/models/{name}"' in exclusive
    stats = client.get("/api/v1/stats").json()
    from registry.http.web import human_bytes

    assert human_bytes(stats["logical_bytes"]) in text
    # cached heavy part refreshes when the index changes
    push(client, small_model("c", "three"))
    assert 'href="/models/c"' in page(client, "/stats")


def test_stats_exclusive_bytes_are_exact(registry_ctx, client):
    from registry.services.webviews import model_storage

    push(client, small_model("a", "one"))
    push(client, small_model("b", "two"))
    push(client, fixture_carton("02"))
    entries = manifest_entries(fixture_carton("02"))
    with registry_ctx.sessions() as s:
        result = {m["name"]: m for m in model_storage(s)["exclusive"]}
        from registry.db.tables import Blob

        sizes = {b.sha256: b.size for b in s.query(Blob)}
    expected = sum(sizes[h] for h in set(entries.values()))
    # fixture 02 shares nothing with fixture 01 except possibly identical small files
    shared_with_01 = set(entries.values()) & set(manifest_entries(fixture_carton("01")).values())
    expected -= sum(sizes[h] for h in shared_with_01)
    assert result["selftest_identity"]["exclusive"] == expected
    # a and b: only their own carton.toml is exclusive
    assert result["a"]["exclusive"] < result["a"]["total"]


def test_404_is_html_for_browsers_and_json_for_api_clients(client):
    text = page(client, "/models/no-such-model", status=404)
    assert "no-such-model" in text and "Not found" in text and "/static/style.css" in text
    text = page(client, "/no/such/page", status=404)
    assert "404" in text
    api = client.get("/models/no-such-model")
    assert api.status_code == 404 and api.json()["error"]
    api = client.get("/models/no-such-model", headers={"Accept": "application/json"})
    assert api.status_code == 404 and "error" in api.json()
    # API paths stay JSON even for browsers
    api = client.get("/api/v1/models/no-such-model", headers=BROWSER)
    assert api.status_code == 404 and "error" in api.json()
    api = client.get("/blobs/" + "0" * 64, headers=BROWSER)
    assert api.status_code == 404 and api.headers["content-type"].startswith("application/json")


def test_stats_page_does_not_wait_for_a_slow_aggregate(client, registry_ctx, monkeypatch):
    import threading

    from registry.services import webviews

    push(client, small_model("a", "one"))
    release = threading.Event()
    real = webviews.model_storage

    def slow(session, limit=webviews.TOP):
        release.wait(10)
        return real(session, limit)

    monkeypatch.setattr(webviews, "model_storage", slow)
    monkeypatch.setattr(webviews, "STATS_WAIT_SECONDS", 0.05)
    monkeypatch.setattr(webviews.storage_stats, "__defaults__", (0.05,))
    text = page(client, "/stats")
    assert "being computed" in text
    release.set()
    result = webviews.storage_stats(registry_ctx, wait=5)
    assert not result["pending"] and not result["stale"]
    assert [m["name"] for m in result["exclusive"]] == ["a"]
    assert 'href="/models/a"' in page(client, "/stats")


def crumbs(text: str) -> str:
    """The breadcrumb's words, tags stripped."""
    nav = re.search(r'<nav class="crumbs"[^>]*>(.*?)</nav>', text, re.S)
    assert nav, "the page has a breadcrumb"
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", nav.group(1))).split())


def test_breadcrumbs_name_the_model_and_version(client):
    push(client, small_model("m", "first"))
    second = push(client, small_model("m", "second"))["manifest_sha256"]
    assert crumbs(page(client, "/models/m")) == "Models / m / v2"
    assert crumbs(page(client, "/models/m?version=1")) == "Models / m / v1"
    text = page(client, f"/cartons/{second}")
    assert crumbs(text) == f"Models / m / v2 / carton {second[:12]}"
    assert 'href="/models/m?version=2"' in text


def test_a_small_saving_is_never_shown_as_zero_percent(client, tmp_path):
    """Two big cartons sharing a few hundred bytes: saved is under 1%, not "0%"."""
    from tests.integration.cli.conftest import make_carton

    shared = {"model/config.json": b'{"layers": 12}'}
    for name in ("big-a", "big-b"):
        files = {**shared, "model/w.bin": os.urandom(1 << 20)}
        push(client, make_carton(tmp_path / f"{name}.carton", name, files))
    totals = client.get("/api/v1/stats").json()
    saved = totals["logical_bytes"] - totals["stored_bytes"]
    assert 0 < saved < totals["logical_bytes"] / 100
    assert "saved by dedup (&lt;1%)" in page(client, "/")
    assert "saved (&lt;1%)" in page(client, "/stats")
    assert "(0%)" not in page(client, "/") + page(client, "/stats")
