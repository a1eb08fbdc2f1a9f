"""The CLI's argument parsing, defaults and error reporting (no real server)."""

from __future__ import annotations

import httpx
import pytest

from registry import cli
from registry.cli import client_commands, download_commands, operator_commands, server_commands
from registry.cli.output import human_bytes
from registry.client import RegistryClient


def mock_connect(handler, opened=None):
    """A ``connect`` for ``cli.main`` whose clients answer through ``handler``."""

    def connect(url, token):
        if opened is not None:
            opened.append((url, token))
        return RegistryClient(url, token, transport=httpx.MockTransport(handler))

    return connect


def no_models(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"models": [], "next_cursor": None})


def test_url_and_token_defaults_from_env(monkeypatch, capsys):
    monkeypatch.setenv("REGISTRY_URL", "http://reg.example:9000")
    monkeypatch.setenv("REGISTRY_TOKEN", "tok")
    seen: list[httpx.Request] = []
    opened: list[tuple[str, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return no_models(request)

    assert cli.main(["ls"], connect=mock_connect(handler, opened)) == 0
    assert opened == [("http://reg.example:9000", "tok")]
    assert str(seen[0].url).startswith("http://reg.example:9000/api/v1/models")
    assert seen[0].headers["Authorization"] == "Bearer tok"


def test_url_after_the_verb_wins(monkeypatch):
    monkeypatch.delenv("REGISTRY_URL", raising=False)
    monkeypatch.delenv("REGISTRY_TOKEN", raising=False)
    seen = {}
    monkeypatch.setattr(
        client_commands, "cmd_push", lambda args, connect: seen.update(vars(args)) or 0
    )
    assert cli.main(["push", "x.carton", "--url", "http://h:1", "--tag", "t", "--full"]) == 0
    assert seen["url"] == "http://h:1" and seen["tag"] == "t" and seen["full"] is True
    assert seen["token"] is None
    assert cli.main(["--url", "http://g:2", "push", "x.carton"]) == 0
    assert seen["url"] == "http://g:2"
    assert cli.main(["push", "x.carton"]) == 0
    assert seen["url"] == "http://127.0.0.1:8080"


def test_usage_errors_return_2(capsys):
    assert cli.main(["pull"]) == 2
    assert cli.main(["hydrate"]) == 2
    assert cli.main(["serve", "--port", "nope"]) == 2


def test_help_returns_0(capsys):
    assert cli.main([]) == 0  # no command: the help, as --help prints it
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for verb in ("serve", "push", "pull", "hydrate", "ls", "info", "inspect", "db"):
        assert verb in out
    for verb in ("gc", "fsck", "token"):
        assert verb in out
    for verb in ("versions", "tags", "tag", "untag", "rm", "login", "logout"):
        assert f"\n    {verb} " in out


def test_operator_commands_parse_before_opening_the_registry(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(operator_commands, "cmd_gc", lambda args: calls.append(args.grace) or 0)
    assert cli.main(["gc", "--grace", "90s"]) == 0
    assert calls == [90.0]
    assert cli.main(["gc", "--grace", "soon"]) == 2
    assert "not a duration" in capsys.readouterr().err
    assert cli.main(["fsck", "--sample", "0"]) == 2
    assert cli.main(["token", "create"]) == 2  # --scope is required
    assert cli.main(["token", "create", "--scope", "root"]) == 2
    assert cli.main(["token"]) == 2


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
    assert server_commands.is_loopback(host) is loopback


def test_human_bytes():
    assert human_bytes(0) == "0 B"
    assert human_bytes(1023) == "1023 B"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(5 * 1024**3) == "5.0 GiB"
    assert human_bytes(None) == "-"


def test_server_errors_are_reported(capsys):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, json={"error": "token lacks the pull scope"})

    assert cli.main(["info", "m", "--url", "http://reg.test"], connect=mock_connect(handler)) == 1
    err = capsys.readouterr().err
    assert err.strip() == "error: token lacks the pull scope (HTTP 403)"


def test_non_json_errors_are_reported(capsys):
    connect = mock_connect(lambda r: httpx.Response(502, text="bad gw"))
    assert cli.main(["ls", "--url", "http://reg.test"], connect=connect) == 1
    assert "bad gw (HTTP 502)" in capsys.readouterr().err


def test_ls_without_models_says_so(capsys):
    assert cli.main(["ls", "-q", "zebra"], connect=mock_connect(no_models)) == 0
    assert capsys.readouterr().err.strip() == "no models match 'zebra'"


def test_tables_align_columns_and_leave_no_trailing_spaces(capsys):
    from registry.cli.output import print_table

    print_table(
        ("NAME", "SIZE", "NOTE"), [("a", "1.5 KiB", ""), ("longer", "3 B", "x")], right=("SIZE",)
    )
    assert capsys.readouterr().out.splitlines() == [
        "NAME       SIZE  NOTE",
        "a       1.5 KiB",
        "longer      3 B  x",
    ]


def test_an_unexpected_error_is_one_line_unless_debugging(monkeypatch, capsys):
    def broken(args, connect):
        raise RuntimeError("oops")

    monkeypatch.setattr(download_commands, "cmd_pull", broken)
    assert cli.main(["pull", "m"]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: unexpected RuntimeError: oops (a bug; CARTON_REGISTRY_DEBUG=1 shows where)"
    ]
    monkeypatch.setenv("CARTON_REGISTRY_DEBUG", "1")
    with pytest.raises(RuntimeError):
        cli.main(["pull", "m"])
