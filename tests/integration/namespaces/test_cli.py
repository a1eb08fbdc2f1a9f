"""The two-team walk-through of the README, through the CLI against a live server."""

from __future__ import annotations

import json

import pytest

from tests.cli_runner import cli  # noqa: F401
from tests.helpers import make_carton
from tests.integration.namespaces.conftest import SECRET

pytestmark = pytest.mark.settings(auth="write")


def token(cli, live_server, monkeypatch, *args: str) -> str:  # noqa: F811
    """``token create`` on the server's storage (an operator command)."""
    s = live_server.ctx.settings
    monkeypatch.setenv("REGISTRY_DATA_DIR", str(s.data_dir))
    monkeypatch.setenv("REGISTRY_DATABASE_URL", s.database_url)
    monkeypatch.setenv("REGISTRY_BLOB_STORE", s.blob_store)
    if s.s3_endpoint_url:
        monkeypatch.setenv("REGISTRY_S3_ENDPOINT_URL", s.s3_endpoint_url)
    run = cli("token", "create", *args, "--json")
    assert run.code == 0, run.err
    return str(json.loads(run.out)["token"])


def test_two_teams(cli, live_server, monkeypatch, tmp_path) -> None:  # noqa: F811
    url = live_server.url
    admin = token(cli, live_server, monkeypatch, "--scope", "admin")
    assert cli("namespace", "create", "acme", "--private", "--url", url, "--token", admin).code == 0
    assert cli("namespace", "create", "open", "--url", url, "--token", admin).code == 0
    acme = token(cli, live_server, monkeypatch, "--scope", "push", "--namespace", "acme")
    both = token(
        cli,
        live_server,
        monkeypatch,
        "--scope",
        "pull",
        "--namespace",
        "acme",
        "--namespace",
        "open",
    )
    unknown = cli("token", "create", "--scope", "pull", "--namespace", "nosuch")
    assert unknown.code != 0 and "nosuch" in unknown.err

    who = cli("whoami", "--url", url, "--token", both)
    assert who.code == 0, who.err
    assert "namespaces acme, open" in who.out and "scopes    pull" in who.out

    carton = tmp_path / "bert.carton"
    carton.write_bytes(make_carton({"w.bin": SECRET}, model_name="bert"))
    pushed = cli(
        "push", str(carton), "--namespace", "acme", "--tag", "prod", "--url", url, "--token", acme
    )
    assert pushed.code == 0, pushed.err
    assert "acme/bert version 1" in pushed.out

    listed = cli("ls", "acme/", "--url", url, "--token", both)
    assert listed.code == 0 and "acme/bert" in listed.out
    assert "acme/bert" not in cli("ls", "--url", url).out  # anonymous
    refused = cli("ls", "acme/", "--url", url)
    assert refused.code != 0 and "no namespace named 'acme'" in refused.err

    for ref in ("acme/bert", "acme/bert:1", "acme/bert@prod"):
        out = tmp_path / "pulled.carton"
        run = cli("pull", ref, "-o", str(out), "--full", "--url", url, "--token", both)
        assert run.code == 0, (ref, run.err)
        assert SECRET in out.read_bytes() or out.stat().st_size > len(SECRET)
        bad = cli("pull", ref, "-o", str(out), "--url", url)
        assert bad.code != 0, ref

    spaces = cli("namespace", "ls", "--json", "--url", url)
    assert [n["name"] for n in json.loads(spaces.out)] == ["open"]
    spaces = cli("namespace", "ls", "--url", url, "--token", both)
    assert "acme" in spaces.out and "private" in spaces.out
