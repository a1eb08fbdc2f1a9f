"""RegistryClient against a mock transport: pagination, byte counting, error decoding."""

from __future__ import annotations

import json

import httpx
import pytest

from registry.client import ClientError

SHA = "a" * 64


def test_ls_follows_cursor(mock_client):
    pages = {
        None: {"models": [{"name": "a"}], "next_cursor": "c1"},
        "c1": {"models": [{"name": "b"}], "next_cursor": None},
    }

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=pages[request.url.params.get("cursor")])

    with mock_client(handler) as c:
        assert [m["name"] for m in c.list_models()] == ["a", "b"]


def test_bytes_sent_counts_json_and_streams(mock_client):
    def handler(request: httpx.Request) -> httpx.Response:
        request.read()
        if request.url.path.endswith("/missing"):
            return httpx.Response(200, json={"missing": json.loads(request.content)["sha256"]})
        return httpx.Response(201, json={"created": True})

    with mock_client(handler) as c:
        assert c.missing_blobs([SHA]) == [SHA]
        json_bytes = c.bytes_sent
        assert json_bytes > 64
        c.put_blob(SHA, [b"x" * 1000, b"y" * 24], 1024)
        assert c.bytes_sent == json_bytes + 1024
        assert c.count("PUT") == 1 and c.count("POST", "/api/v1/blobs") == 1


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (httpx.Response(404, json={"error": "no carton"}), "no carton (HTTP 404)"),
        (httpx.Response(502, text="  bad gateway \n"), "bad gateway (HTTP 502)"),
        (httpx.Response(500), "Internal Server Error (HTTP 500)"),
    ],
)
def test_errors_carry_the_server_message_and_status(mock_client, response, message):
    with mock_client(lambda r: response) as c, pytest.raises(ClientError) as info:
        c.get_carton(SHA)
    assert str(info.value) == message
    assert info.value.status == response.status_code


def test_a_body_shorter_than_announced_is_a_truncated_upload(mock_client):
    def handler(request: httpx.Request) -> httpx.Response:
        request.read()
        return httpx.Response(201, json={"created": True})

    with mock_client(handler) as c, pytest.raises(ClientError, match="upload truncated") as info:
        c.post_carton([b"x" * 1000], 4096)
    assert "after 1000 of 4096 bytes" in info.value.message
