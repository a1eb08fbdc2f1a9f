"""Slim cartons of private models carry signed, expiring LINKS URLs the loader can fetch
without a token; public models keep plain URLs."""

from __future__ import annotations

import io
import time
import zipfile
from urllib.parse import parse_qs, urlsplit

import pytest

from registry.carton.links import parse_links
from registry.services.signing import secret_key, signature
from tests.helpers import make_carton
from tests.integration.namespaces.conftest import SECRET, SHARED, Teams, sha

# AUTH=all: every read needs a token, except a signed blob URL.
pytestmark = pytest.mark.settings(auth="all", slim_inline_max_bytes=16)


def links_of(carton: bytes) -> dict[str, list[str]]:
    with zipfile.ZipFile(io.BytesIO(carton)) as z:
        return parse_links(z.read("LINKS"))


def loader_get(client, url: str, **kw):
    """As the carton loader fetches a LINKS URL: absolute, no token, no Accept-Encoding."""
    return client.request(
        kw.pop("method", "GET"), url, headers={"Accept-Encoding": "identity", **kw}
    )


def test_private_slim_carton_links_are_signed_and_work_without_a_token(
    client, teams: Teams
) -> None:
    r = client.get(f"/cartons/{teams.acme_sha}.carton", headers=teams.h("acme_pull"))
    assert r.status_code == 200
    links = links_of(r.content)
    url = links[sha(SECRET)][0]
    parts = urlsplit(url)
    assert parts.path == f"/blobs/{sha(SECRET)}"
    query = parse_qs(parts.query)
    expires = int(query["expires"][0])
    assert time.time() + 6 * 86400 < expires <= time.time() + 7 * 86400 + 1  # default 7d
    head = loader_get(client, url, method="HEAD")
    assert head.status_code == 200 and int(head.headers["content-length"]) == len(SECRET)
    assert "private" in head.headers["cache-control"]
    got = loader_get(client, url)
    assert got.status_code == 200 and got.content == SECRET
    ranged = loader_get(client, url, Range="bytes=0-9")
    assert ranged.status_code == 206 and ranged.content == SECRET[:10]
    # the same carton again: same bytes (cacheable), same ETag
    again = client.get(f"/cartons/{teams.acme_sha}.carton", headers=teams.h("acme_pull"))
    assert again.content == r.content and again.headers["etag"] == r.headers["etag"]


def test_altered_or_expired_signatures_are_404(client, registry_ctx, teams: Teams) -> None:
    r = client.get(f"/cartons/{teams.acme_sha}.carton", headers=teams.h("acme_pull"))
    url = links_of(r.content)[sha(SECRET)][0]
    base, query = url.split("?")
    q = parse_qs(query)
    expires, sig = q["expires"][0], q["sig"][0]
    flipped = sig[:-1] + ("0" if sig[-1] != "0" else "1")
    past = int(time.time()) - 10
    past_sig = signature(secret_key(registry_ctx.settings), sha(SECRET), past)
    other = f"/blobs/{sha(SHARED)}?expires={expires}&sig={sig}"  # another blob, same signature
    for bad in (
        f"{base}?expires={expires}&sig={flipped}",
        f"{base}?expires={int(expires) + 1}&sig={sig}",
        f"{base}?expires={past}&sig={past_sig}",
        f"{base}?sig={sig}",
        f"{base}?expires=soon&sig={sig}",
        other,
    ):
        for method in ("GET", "HEAD"):
            got = loader_get(client, bad, method=method)
            assert got.status_code == 404, (bad, method, got.status_code)
    missing = client.get(f"/blobs/{'0' * 64}", headers=teams.h("admin"))
    altered = loader_get(client, f"{base}?expires={expires}&sig={flipped}")
    assert altered.json() == missing.json() | {
        "error": missing.json()["error"].replace("0" * 64, sha(SECRET))
    }
    # and without any signature, AUTH=all wants a token
    assert loader_get(client, base).status_code == 401


def test_public_models_keep_plain_urls(client, teams: Teams) -> None:
    carton = make_carton({"big.bin": b"public weights " * 100}, model_name="gpt")
    r = client.post(
        "/api/v1/cartons",
        content=carton,
        params={"namespace": "open"},
        headers=teams.h("open_push"),
    )
    assert r.status_code == 201, r.text
    slim = client.get(
        f"/cartons/{r.json()['manifest_sha256']}.carton", headers=teams.h("open_push")
    )
    for urls in links_of(slim.content).values():
        assert "?" not in urls[0]


def test_lifetime_is_a_setting(client, registry_ctx, teams: Teams) -> None:
    from registry.services.signing import link_expiry

    short = registry_ctx.settings.replace(signed_url_ttl=60.0)
    assert time.time() + 50 <= link_expiry(short) <= time.time() + 61
