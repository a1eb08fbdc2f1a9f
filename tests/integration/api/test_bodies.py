"""JSON bodies of /api/v1: capped in size, decoded strictly, and described by OpenAPI."""

from __future__ import annotations

from typing import Any

import pytest

from registry.http.schemas import MAX_JSON_BODY_BYTES
from tests.conftest import fixture_carton

JSON_ROUTES = [
    ("POST", "/api/v1/blobs/missing", b'{"sha256": [', b"]}"),
    ("PUT", "/api/v1/models/m/tags/t", b'{"version": ', b"1}"),
]


def padded(head: bytes, tail: bytes, size: int) -> bytes:
    """A valid document of exactly ``size`` bytes (whitespace in the middle)."""
    return head + b" " * (size - len(head) - len(tail)) + tail


def chunked(data: bytes, size: int = 1 << 20) -> Any:
    """The body as a stream: sent without Content-Length."""
    for i in range(0, len(data), size):
        yield data[i : i + size]


@pytest.mark.parametrize(
    ("method", "url", "head", "tail"), JSON_ROUTES, ids=[r[1] for r in JSON_ROUTES]
)
def test_json_bodies_are_capped_whether_declared_or_streamed(client, method, url, head, tail):
    at_limit = padded(head, tail, MAX_JSON_BODY_BYTES)
    assert client.request(method, url, content=at_limit).status_code != 413
    over = padded(head, tail, MAX_JSON_BODY_BYTES + 1)
    declared = client.request(method, url, content=over)
    assert declared.status_code == 413 and declared.json()["error"]
    streamed = client.request(method, url, content=chunked(over))
    assert streamed.status_code == 413 and streamed.json()["error"]


@pytest.mark.parametrize(
    "body", [b'{"version": "1"}', b'{"version": 1.0}', b'{"version": true}', b"[1]", b"{x"]
)
def test_tag_bodies_are_not_coerced(client, body):
    """Version 1 exists: a lenient decoder would move the tag; a strict one says 400."""
    client.post("/api/v1/cartons", content=fixture_carton("02").read_bytes())
    response = client.put("/api/v1/models/selftest_identity/tags/x", content=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]


def schema_of(doc: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with ``$ref`` and ``oneOf [X, null]`` resolved to the object schema."""
    if "$ref" in node:
        return schema_of(doc, doc["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]])
    for option in node.get("oneOf", ()):
        if option.get("type") != "null":
            return schema_of(doc, option)
    return node


@pytest.mark.parametrize(
    ("method", "path", "request_fields", "response_fields"),
    [
        ("post", "/api/v1/cartons", None, {"manifest_sha256", "bytes_new"}),
        ("post", "/api/v1/blobs/missing", {"sha256"}, {"missing"}),
        ("put", "/api/v1/blobs/{sha256}", None, {"sha256", "size", "created"}),
        ("put", "/api/v1/models/{name}/tags/{tag}", {"version", "manifest_sha256"}, {"tag"}),
        ("get", "/api/v1/models", None, {"models", "next_cursor"}),
        ("get", "/api/v1/models/{name}", None, {"versions", "tags"}),
        ("get", "/api/v1/cartons/{sha256}", None, {"manifest_sha256", "runner", "files"}),
        ("get", "/api/v1/stats", None, {"logical_bytes", "dedup_ratio"}),
    ],
)
def test_openapi_describes_the_bodies(client, method, path, request_fields, response_fields):
    doc = client.get("/api/openapi/openapi.json").json()
    operation = doc["paths"][path][method]
    if request_fields is not None:
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        assert request_fields <= set(schema_of(doc, body)["properties"])
    ok = next(v for k, v in operation["responses"].items() if k.startswith("2"))
    schema = schema_of(doc, ok["content"]["application/json"]["schema"])
    assert response_fields <= set(schema["properties"])


@pytest.mark.parametrize(
    ("method", "url"), [(m, u) for m, u, *_ in JSON_ROUTES], ids=[r[1] for r in JSON_ROUTES]
)
def test_a_blank_body_is_no_body(client, method, url):
    empty = client.request(method, url, content=b"")
    blank = client.request(method, url, content=b" \n\t ")
    assert empty.status_code == blank.status_code == 400
    assert empty.json() == blank.json()
