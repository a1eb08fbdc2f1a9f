"""GET/HEAD /cartons/{sha256}.carton: slim and full rebuilt cartons, on every backend pair."""

from __future__ import annotations

import pytest

from registry.services.export import build_carton
from tests.conftest import FIXTURE_CARTONS, fixture_carton
from tests.integration.pull.helpers import (
    check_full,
    check_slim,
    file_sizes,
    make_carton,
    push,
    sha256,
)

PUSHABLE = [p for p in FIXTURE_CARTONS if "05_links" not in p.name]


def _get_twice(client, url: str, **params) -> bytes:
    first = client.get(url, params=params)
    assert first.status_code == 200, first.text
    assert first.headers["content-type"] == "application/zip"
    assert int(first.headers["content-length"]) == len(first.content)
    second = client.get(url, params=params)
    assert second.content == first.content
    assert second.headers["etag"] == first.headers["etag"]
    return first.content


def _round_trip(client, registry_ctx, carton) -> None:
    sha = push(client, carton)["manifest_sha256"]
    url = f"/cartons/{sha}.carton"
    settings = registry_ctx.settings

    full = _get_twice(client, url, form="full")
    check_full(full, sha)

    slim = _get_twice(client, url)
    assert _get_twice(client, url, form="slim") == slim
    links = check_slim(
        slim, sha, file_sizes(client, sha), settings.slim_inline_max_bytes, settings.public_url
    )
    # Every LINKS URL is served by this registry and yields the linked bytes.
    for digest, urls in links.items():
        response = client.get(urls[0], headers={"Accept-Encoding": "identity"})
        assert response.status_code == 200
        assert sha256(response.content) == digest
    return links


@pytest.mark.parametrize("carton", PUSHABLE, ids=lambda p: p.name)
def test_round_trip_default_threshold(client, registry_ctx, carton):
    _round_trip(client, registry_ctx, carton)


@pytest.mark.settings(slim_inline_max_bytes=16)
@pytest.mark.parametrize("carton", PUSHABLE, ids=lambda p: p.name)
def test_round_trip_small_threshold_links_files(client, registry_ctx, carton):
    links = _round_trip(client, registry_ctx, carton)
    if "01_minimal" not in carton.name:  # 01's only other file is 13 bytes
        assert links, "with a 16-byte threshold something must be linked"


def test_service_layout_matches_http(client, registry_ctx):
    sha = push(client, fixture_carton("02"))["manifest_sha256"]
    for form in ("slim", "full"):
        exported = build_carton(registry_ctx, sha, form)
        body = b"".join(exported.layout.iter_bytes())
        assert len(body) == exported.size
        response = client.get(f"/cartons/{sha}.carton", params={"form": form})
        assert response.content == body
        assert response.headers["etag"] == exported.etag
        assert exported.filename.endswith(".carton")


def test_slim_and_full_differ_in_etag(client):
    sha = push(client, fixture_carton("02"))["manifest_sha256"]
    slim = client.head(f"/cartons/{sha}.carton").headers["etag"]
    full = client.head(f"/cartons/{sha}.carton?form=full").headers["etag"]
    assert slim != full
    assert slim.startswith(f'"{sha}-slim-') and full.startswith(f'"{sha}-')


def test_head_matches_get(client):
    sha = push(client, fixture_carton("03"))["manifest_sha256"]
    for query in ("", "?form=full"):
        url = f"/cartons/{sha}.carton{query}"
        got = client.get(url)
        head = client.head(url)
        assert head.status_code == 200
        assert head.content == b""
        for name in (
            "content-length",
            "etag",
            "content-type",
            "accept-ranges",
            "cache-control",
            "content-disposition",
        ):
            assert head.headers[name] == got.headers[name], name
        assert head.headers["accept-ranges"] == "bytes"
        assert head.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert head.headers["content-disposition"].startswith("attachment; filename=")


def test_ranges(client):
    sha = push(client, fixture_carton("02"))["manifest_sha256"]
    url = f"/cartons/{sha}.carton"
    body = client.get(url).content
    size = len(body)

    def get_range(spec: str, **headers):
        return client.get(url, headers={"Range": spec, **headers})

    r = get_range("bytes=0-99")
    assert r.status_code == 206
    assert r.content == body[:100]
    assert r.headers["content-range"] == f"bytes 0-99/{size}"
    assert r.headers["content-length"] == "100"

    r = get_range("bytes=-100")
    assert r.status_code == 206 and r.content == body[-100:]
    assert r.headers["content-range"] == f"bytes {size - 100}-{size - 1}/{size}"

    # The carton loader's first request: the last 66 KiB (more than the whole file here).
    r = get_range("bytes=-67584")
    assert r.status_code == 206 and r.content == body
    assert r.headers["content-range"] == f"bytes 0-{size - 1}/{size}"

    r = get_range(f"bytes={size - 10}-")
    assert r.status_code == 206 and r.content == body[-10:]

    r = get_range(f"bytes=5-{size + 1000}")
    assert r.status_code == 206 and r.content == body[5:]

    # Concatenated ranges give the whole body.
    parts = [get_range(f"bytes={i}-{min(i + 999, size - 1)}").content for i in range(0, size, 1000)]
    assert b"".join(parts) == body

    for spec in (f"bytes={size}-", f"bytes={size + 5}-{size + 10}", "bytes=-0"):
        r = get_range(spec)
        assert r.status_code == 416, spec
        assert r.headers["content-range"] == f"bytes */{size}"
        assert "error" in r.json()

    # Ignored: several ranges, other units, nonsense, If-Range not matching.
    for spec in ("bytes=0-1,5-6", "items=0-1", "bytes=abc", "bytes=9-3"):
        r = get_range(spec)
        assert r.status_code == 200 and r.content == body, spec
    etag = client.head(url).headers["etag"]
    assert get_range("bytes=0-9", **{"If-Range": '"other"'}).status_code == 200
    r = get_range("bytes=0-9", **{"If-Range": etag})
    assert r.status_code == 206 and r.content == body[:10]


def test_if_none_match(client):
    sha = push(client, fixture_carton("01"))["manifest_sha256"]
    url = f"/cartons/{sha}.carton"
    etag = client.head(url).headers["etag"]
    for value in (etag, f"W/{etag}", f'"nope", {etag}', "*"):
        r = client.get(url, headers={"If-None-Match": value})
        assert r.status_code == 304, value
        assert r.content == b""
        assert r.headers["etag"] == etag
        assert client.head(url, headers={"If-None-Match": value}).status_code == 304
    assert client.get(url, headers={"If-None-Match": '"nope"'}).status_code == 200
    # The full form has another ETag: the slim one does not match it.
    assert client.get(url + "?form=full", headers={"If-None-Match": etag}).status_code == 200


def test_errors(client):
    sha = push(client, fixture_carton("01"))["manifest_sha256"]
    r = client.get(f"/cartons/{sha}.carton?form=fat")
    assert r.status_code == 400 and "form" in r.json()["error"]
    assert client.head(f"/cartons/{sha}.carton?form=fat").status_code == 400
    for bad in ("abc", sha.upper(), sha[:-1] + "g", sha + "0"):
        r = client.get(f"/cartons/{bad}.carton")
        assert r.status_code == 400, bad
        assert "error" in r.json()
    unknown = "0" * 64
    r = client.get(f"/cartons/{unknown}.carton")
    assert r.status_code == 404 and "error" in r.json()
    assert client.head(f"/cartons/{unknown}.carton").status_code == 404


def test_unnamed_carton_and_duplicate_contents(client):
    same = b"x" * 100
    data = make_carton({"model/a.bin": same, "model/b.bin": same, "model/empty": b""})
    sha = push(client, data)["manifest_sha256"]
    full = client.get(f"/cartons/{sha}.carton?form=full").content
    check_full(full, sha)


def test_redirects_by_version_and_tag(client):
    first = push(client, fixture_carton("01"), model="redirected")
    second = push(client, make_carton({"model/x.txt": b"second\n"}, model_name="redirected"))
    assert (first["version"], second["version"]) == (1, 2)
    r = client.put("/api/v1/models/redirected/tags/prod", json={"version": 1})
    assert r.status_code == 200, r.text

    cases = {
        "/models/redirected/versions/1.carton": first,
        "/models/redirected/versions/2.carton": second,
        "/models/redirected/tags/prod.carton": first,
    }
    for url, pushed in cases.items():
        target = f"/cartons/{pushed['manifest_sha256']}.carton"
        r = client.get(url, follow_redirects=False)
        assert r.status_code == 307, url
        assert r.headers["location"] == target
        r = client.get(url + "?form=full", follow_redirects=False)
        assert r.status_code == 307
        assert r.headers["location"] == target + "?form=full"
        assert client.head(url, follow_redirects=False).status_code == 307
        followed = client.get(url + "?form=full")
        assert followed.status_code == 200
        assert followed.content == client.get(target + "?form=full").content

    # Moving the tag moves the redirect.
    client.put("/api/v1/models/redirected/tags/prod", json={"version": 2})
    r = client.get("/models/redirected/tags/prod.carton", follow_redirects=False)
    assert r.headers["location"] == f"/cartons/{second['manifest_sha256']}.carton"

    for url in (
        "/models/redirected/versions/3.carton",
        "/models/redirected/versions/one.carton",
        "/models/redirected/versions/1",
        "/models/redirected/tags/nope.carton",
        "/models/nobody/versions/1.carton",
        "/models/nobody/tags/prod.carton",
    ):
        r = client.get(url, follow_redirects=False)
        assert r.status_code == 404, url
        assert "error" in r.json()


def test_deleted_version_404s_at_once_even_after_a_cached_pull(client):
    """Layouts are cached per manifest, but every request still checks the index."""
    from tests.conftest import fixture_carton

    pushed = client.post("/api/v1/cartons", content=fixture_carton("02").read_bytes()).json()
    url = f"/cartons/{pushed['manifest_sha256']}.carton"
    assert client.get(url).status_code == 200
    assert client.head(url).status_code == 200
    deleted = client.delete(f"/api/v1/models/{pushed['model_name']}/versions/{pushed['version']}")
    assert deleted.status_code == 200
    assert client.get(url).status_code == 404
    assert client.head(url).status_code == 404
