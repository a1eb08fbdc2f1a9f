"""References (hash, name, name:version, name@tag) and how they resolve."""

from __future__ import annotations

import httpx
import pytest

from registry.client import ClientError, parse_ref, resolve

SHA = "a" * 64
SHA2 = "b" * 64

MODEL = {
    "name": "m",
    "versions": [
        {"version": 2, "manifest_sha256": SHA2},
        {"version": 1, "manifest_sha256": SHA},
    ],
    "tags": {"prod": {"version": 1, "manifest_sha256": SHA}},
}


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        (SHA, (None, None, None)),
        ("resnet", ("resnet", None, None)),
        ("resnet:3", ("resnet", 3, None)),
        ("resnet@prod", ("resnet", None, "prod")),
        ("my model", ("my model", None, None)),
        ("org:model:12", ("org:model", 12, None)),
        ("a@b@latest", ("a@b", None, "latest")),
        ("name:v1", ("name", 1, None)),  # as ls and the web print versions (issue 26)
        ("name:vx", ("name:vx", None, None)),  # not a version: a plain name
        ("A" * 64, ("A" * 64, None, None)),  # uppercase hex is not a manifest hash
        (f"sha256:{SHA}", (None, None, None)),
        ("sha256:abcdef01", (None, None, None)),  # a hash prefix, resolved by the registry
        ("abcdef01", ("abcdef01", None, None)),  # a name first, a prefix if no such model
    ],
)
def test_parse_ref(ref, expected):
    assert parse_ref(ref) == expected


def test_empty_reference_is_an_error():
    with pytest.raises(ClientError, match="empty reference"):
        parse_ref("")


def test_resolve_references(mock_client):
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/api/v1/models/m":
            return httpx.Response(200, json=MODEL)
        return httpx.Response(404, json={"error": f"no model named {request.url.path}"})

    with mock_client(handler, token="sekrit") as c:
        assert resolve(c, SHA) == (SHA, None)
        assert resolve(c, "m") == (SHA2, "m")  # no latest tag: highest version
        assert resolve(c, "m:1") == (SHA, "m")
        assert resolve(c, "m@prod") == (SHA, "m")
        with pytest.raises(ClientError, match="no tag 'dev'"):
            resolve(c, "m@dev")
        with pytest.raises(ClientError, match="no version 7"):
            resolve(c, "m:7")
        with pytest.raises(ClientError) as info:
            resolve(c, "other")
        assert info.value.status == 404
    assert all(r.headers["Authorization"] == "Bearer sekrit" for r in seen)


def test_resolve_prefers_latest_tag(mock_client):
    model = {**MODEL, "tags": {"latest": {"version": 1, "manifest_sha256": SHA}}}
    with mock_client(lambda r: httpx.Response(200, json=model)) as c:
        assert resolve(c, "m") == (SHA, "m")


def test_model_names_are_quoted_in_paths(mock_client):
    paths = []

    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.raw_path)
        return httpx.Response(200, json=MODEL)

    with mock_client(handler) as c:
        resolve(c, "my model:1")
    assert paths == [b"/api/v1/models/my%20model"]


def test_hash_prefixes_resolve_through_the_registry(mock_client):
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if request.url.path == "/api/v1/models/abcdef01":
            return httpx.Response(200, json={**MODEL, "name": "abcdef01"})
        if request.url.path.startswith("/api/v1/models/"):
            return httpx.Response(404, json={"error": "Not Found"})
        prefix = request.url.path.rsplit("/", 1)[1].removeprefix("sha256:")
        if SHA.startswith(prefix):
            return httpx.Response(200, json={"manifest_sha256": SHA})
        return httpx.Response(404, json={"error": f"no carton's hash starts with {prefix}"})

    with mock_client(handler) as c:
        assert resolve(c, f"sha256:{SHA}") == (SHA, None)
        assert seen == []  # a full hash needs no request
        assert resolve(c, "sha256:aaaaaaaa") == (SHA, None)
        assert resolve(c, "aaaaaaaaaa") == (SHA, None)  # no such model: a prefix
        assert resolve(c, "abcdef01") == (SHA2, "abcdef01")  # the model wins
        with pytest.raises(ClientError, match="no model named 'bbbbbbbb', and no manifest hash"):
            resolve(c, "bbbbbbbb")
        with pytest.raises(ClientError) as info:
            resolve(c, "a/b")  # the API's own 404 for a path it cannot route
        assert (info.value.message, info.value.status) == ("no model named 'a/b'", 404)
