"""The CLI's argument parsing, references, and error reporting (no real server)."""

from __future__ import annotations

import json
import sys
import types

import httpx
import pytest

from registry import cli
from registry import client as api
from registry.client import transport

SHA = "a" * 64
SHA2 = "b" * 64


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
        ("name:v1", ("name:v1", None, None)),  # not an integer version: a plain name
        ("A" * 64, ("A" * 64, None, None)),  # uppercase hex is not a manifest hash
    ],
)
def test_parse_ref(ref, expected):
    assert api.parse_ref(ref) == expected


def test_url_and_token_defaults_from_env(monkeypatch):
    monkeypatch.setenv("REGISTRY_URL", "http://reg.example:9000")
    monkeypatch.setenv("REGISTRY_TOKEN", "tok")
    seen = {}
    monkeypatch.setattr(cli, "cmd_ls", lambda args: seen.update(vars(args)) or 0)
    parser_main = cli.main
    assert parser_main(["ls"]) == 0
    assert seen["url"] == "http://reg.example:9000"
    assert seen["token"] == "tok"


def test_url_after_the_verb_wins(monkeypatch):
    monkeypatch.delenv("REGISTRY_URL", raising=False)
    monkeypatch.delenv("REGISTRY_TOKEN", raising=False)
    seen = {}
    monkeypatch.setattr(cli, "cmd_push", lambda args: seen.update(vars(args)) or 0)
    assert cli.main(["push", "x.carton", "--url", "http://h:1", "--tag", "t", "--full"]) == 0
    assert seen["url"] == "http://h:1" and seen["tag"] == "t" and seen["full"] is True
    assert seen["token"] is None
    assert cli.main(["--url", "http://g:2", "push", "x.carton"]) == 0
    assert seen["url"] == "http://g:2"
    assert cli.main(["push", "x.carton"]) == 0
    assert seen["url"] == api.DEFAULT_URL == "http://127.0.0.1:8080"


def test_usage_errors_return_2(capsys):
    assert cli.main([]) == 2
    assert cli.main(["pull"]) == 2
    assert cli.main(["hydrate", "x.carton"]) == 2  # -o is required
    assert cli.main(["serve", "--port", "nope"]) == 2


def test_help_returns_0(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for verb in ("serve", "push", "pull", "hydrate", "ls", "info", "inspect", "db"):
        assert verb in out


def test_ops_commands_hook(monkeypatch, capsys):
    calls = []

    def add_commands(sub):
        p = sub.add_parser("gc")
        p.add_argument("--grace", default="1h")
        p.set_defaults(func=lambda args: calls.append(args.grace) or 0)

    module = types.ModuleType("registry.cli_ops")
    module.add_commands = add_commands  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "registry.cli_ops", module)
    assert cli.main(["gc", "--grace", "0s"]) == 0
    assert calls == ["0s"]


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.1", False),
        ("example.org", False),
    ],
)
def test_is_loopback(host, loopback):
    assert cli.is_loopback(host) is loopback


def test_human_bytes():
    assert cli.human_bytes(0) == "0 B"
    assert cli.human_bytes(1023) == "1023 B"
    assert cli.human_bytes(1536) == "1.5 KiB"
    assert cli.human_bytes(5 * 1024**3) == "5.0 GiB"
    assert cli.human_bytes(None) == "-"


# -- the client against a mock transport -----------------------------------------------


MODEL = {
    "name": "m",
    "versions": [
        {"version": 2, "manifest_sha256": SHA2},
        {"version": 1, "manifest_sha256": SHA},
    ],
    "tags": {"prod": {"version": 1, "manifest_sha256": SHA}},
}


def mock_client(handler, token=None):
    return api.RegistryClient("http://reg.test", token, transport=httpx.MockTransport(handler))


def test_resolve_references():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/api/v1/models/m":
            return httpx.Response(200, json=MODEL)
        return httpx.Response(404, json={"error": f"no model named {request.url.path}"})

    with mock_client(handler, token="sekrit") as c:
        assert api.resolve(c, SHA) == (SHA, None)
        assert api.resolve(c, "m") == (SHA2, "m")  # no latest tag: highest version
        assert api.resolve(c, "m:1") == (SHA, "m")
        assert api.resolve(c, "m@prod") == (SHA, "m")
        with pytest.raises(api.ClientError, match="no tag 'dev'"):
            api.resolve(c, "m@dev")
        with pytest.raises(api.ClientError, match="no version 7"):
            api.resolve(c, "m:7")
        with pytest.raises(api.ClientError) as info:
            api.resolve(c, "other")
        assert info.value.status == 404
    assert all(r.headers["Authorization"] == "Bearer sekrit" for r in seen)


def test_resolve_prefers_latest_tag():
    model = {**MODEL, "tags": {"latest": {"version": 1, "manifest_sha256": SHA}}}
    with mock_client(lambda r: httpx.Response(200, json=model)) as c:
        assert api.resolve(c, "m") == (SHA, "m")


def test_model_names_are_quoted_in_paths():
    paths = []

    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.raw_path)
        return httpx.Response(200, json=MODEL)

    with mock_client(handler) as c:
        api.resolve(c, "my model:1")
    assert paths == [b"/api/v1/models/my%20model"]


def test_server_errors_are_reported(monkeypatch, capsys):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, json={"error": "token lacks the pull scope"})

    real = api.RegistryClient

    def factory(url=None, token=None, **kw):
        return real(url, token, transport=httpx.MockTransport(handler))

    monkeypatch.setattr(api, "RegistryClient", factory)
    assert cli.main(["info", "m", "--url", "http://reg.test"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == "error: token lacks the pull scope (HTTP 403)"


def test_non_json_errors_are_reported(monkeypatch, capsys):
    real = api.RegistryClient
    monkeypatch.setattr(
        api,
        "RegistryClient",
        lambda url=None, token=None, **kw: real(
            url, token, transport=httpx.MockTransport(lambda r: httpx.Response(502, text="bad gw"))
        ),
    )
    assert cli.main(["ls", "--url", "http://reg.test"]) == 1
    assert "bad gw (HTTP 502)" in capsys.readouterr().err


def test_ls_follows_cursor():
    pages = {
        None: {"models": [{"name": "a"}], "next_cursor": "c1"},
        "c1": {"models": [{"name": "b"}], "next_cursor": None},
    }

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=pages[request.url.params.get("cursor")])

    with mock_client(handler) as c:
        assert [m["name"] for m in c.list_models()] == ["a", "b"]


def test_bytes_sent_counts_json_and_streams():
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
    assert transport.last_client is c
