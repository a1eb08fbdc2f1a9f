"""The web surface (issue 12): HEAD wherever GET works, security headers on pages, blobs
that no browser renders, and an OpenAPI document that loads nothing from elsewhere."""

from __future__ import annotations

import re

import pytest

from tests.conftest import fixture_carton
from tests.integration.web.conftest import BROWSER


@pytest.fixture
def pushed(client) -> dict:
    response = client.post("/api/v1/cartons", content=fixture_carton("03").read_bytes())
    assert response.status_code == 201, response.text
    return response.json()


def read_urls(client, pushed) -> list[str]:
    """Every GET route of the OpenAPI document, filled in, plus the pages and /healthz."""
    sha, name = pushed["manifest_sha256"], pushed["model_name"]
    blob = client.get(f"/api/v1/cartons/{sha}").json()["files"][0]["sha256"]
    values = {"sha256": sha, "name": name, "version": "1", "index": "0", "file": f"{sha}.carton"}
    values["namespace"] = "nosuch"  # HEAD must answer as GET does, a 404 included
    doc = client.get("/api/openapi").json()
    urls = ["/", f"/models/{name}", f"/cartons/{sha}", "/stats", "/static/style.css"]
    urls += ["/healthz?ready=1", "/metrics", "/api/openapi/openapi.json", f"/blobs/{blob}"]
    for path, operations in doc["paths"].items():
        if "get" in operations:
            urls.append(re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path))
    return urls


def test_head_answers_wherever_get_does(client, pushed):
    urls = read_urls(client, pushed)
    assert len(urls) > 20
    for url in urls:
        got = client.get(url, follow_redirects=False)
        head = client.head(url, follow_redirects=False)
        assert head.status_code == got.status_code, (url, head.status_code, head.text)
        assert head.content == b"", url
        if not url.startswith("/static/"):  # Litestar's static files send none on HEAD
            assert head.headers.get("content-type") == got.headers.get("content-type"), url
        if "content-length" in got.headers and url != "/metrics":  # metrics move per request
            assert head.headers["content-length"] == got.headers["content-length"], url


def test_pages_carry_a_csp_without_inline_script_and_cannot_be_framed(client, pushed):
    sha, name = pushed["manifest_sha256"], pushed["model_name"]
    for url, status in [
        ("/", 200),
        (f"/models/{name}", 200),
        (f"/cartons/{sha}", 200),
        ("/stats", 200),
        ("/models/nobody", 404),
        ("/no/such/page", 404),
    ]:
        response = client.get(url, headers=BROWSER)
        assert response.status_code == status, url
        assert response.headers["content-type"].startswith("text/html")
        csp = response.headers["content-security-policy"]
        directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
        assert directives["default-src"] == "'none'"
        assert directives["script-src"] == "'self'" and "unsafe-inline" not in csp
        assert directives["frame-ancestors"] == "'none'"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
        text = response.text
        # Nothing the policy would block: no inline script, handler or style attribute.
        assert not re.search(r"<script(?![^>]*\bsrc=)", text), url
        assert not re.search(r"\son[a-z]+\s*=", text, re.IGNORECASE), url
        assert not re.search(r"\sstyle\s*=", text, re.IGNORECASE), url
        assert not re.search(r"<(script|link)[^>]+(src|href)=\"(https?:)?//", text), url


def test_blobs_are_octet_streams_no_browser_sniffs(client, pushed):
    files = client.get(f"/api/v1/cartons/{pushed['manifest_sha256']}").json()["files"]
    for entry in files:
        response = client.get(f"/blobs/{entry['sha256']}")
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/octet-stream"
        assert response.headers["x-content-type-options"] == "nosniff"
    carton = client.get(f"/cartons/{pushed['manifest_sha256']}.carton")
    assert carton.headers["content-disposition"].startswith("attachment")
    assert carton.headers["x-content-type-options"] == "nosniff"


def test_the_openapi_document_is_json_and_no_page_loads_third_party_code(client):
    response = client.get("/api/openapi")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/vnd.oai.openapi+json")
    assert response.json()["paths"]
    for ui in ("swagger", "redoc", "rapidoc", "elements", "scalar", "openapi.yaml"):
        assert client.get(f"/api/openapi/{ui}").status_code == 404, ui
