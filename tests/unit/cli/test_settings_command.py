"""``carton-registry settings``: every setting of the one table, with its value here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from registry.cli.settings_command import markdown_table
from registry.settings import SETTINGS


@pytest.fixture(autouse=True)
def _no_registry_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("REGISTRY_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def listed(out: str) -> dict[str, str]:
    """``REGISTRY_X`` -> the rest of its line, for each setting line of the listing."""
    rows = [line.split("=", 1) for line in out.splitlines() if line.startswith("REGISTRY_")]
    return {name: rest for name, rest in rows}


def test_every_setting_is_listed_with_its_help(cli) -> None:
    run = cli("settings")
    assert run.code == 0, run.err
    assert list(listed(run.out)) == [item.env for item in SETTINGS]
    for item in SETTINGS:
        assert f"    {item.help}\n" in run.out
    assert run.err == ""


def test_values_come_from_the_environment(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGISTRY_EXPANSION_MIN_BYTES", "1048576")
    monkeypatch.setenv("REGISTRY_GC_GRACE", "7200")
    monkeypatch.setenv("REGISTRY_DATABASE_URL", "postgresql://reg:s3cret@db:5432/registry")
    monkeypatch.setenv("REGISTRY_TOKEN", "crt_secret")
    run = cli("settings")
    assert run.code == 0, run.err
    rows = listed(run.out)
    assert (
        rows["REGISTRY_EXPANSION_MIN_BYTES"]
        == "1048576 (1 MiB)  (set here; default 268435456 (256 MiB))"
    )
    assert rows["REGISTRY_GC_GRACE"] == "2h  (set here; default 1h)"
    assert rows["REGISTRY_MAX_MEMBERS"] == "10000"
    assert rows["REGISTRY_DATABASE_URL"].startswith("postgresql://reg:***@db:5432/registry")
    assert rows["REGISTRY_TOKEN"].startswith("(set, not shown)")
    assert "s3cret" not in run.out and "crt_secret" not in run.out
    here = Path.cwd()
    assert rows["REGISTRY_DATA_DIR"] == f"data ({here / 'data'})"
    assert rows["REGISTRY_BLOB_STORE"] == f"file://{here / 'data' / 'blobs'}"


def test_a_bad_value_is_one_line_naming_it(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGISTRY_LEASE_TIMEOUT", "soon")
    run = cli("settings")
    assert run.code == 2
    assert run.out == ""
    assert (
        run.err == "error: bad settings: REGISTRY_LEASE_TIMEOUT='soon': not a duration: "
        "'soon' (use e.g. 0s, 90s, 30m, 1h, 7d)\n"
    )


def test_db_upgrade_refuses_a_bad_value_in_one_line(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGISTRY_MAX_MEMBERS", "lots")
    run = cli("db", "upgrade")
    assert run.code == 2
    assert (
        run.err == "error: bad settings: REGISTRY_MAX_MEMBERS='lots': not a whole number: 'lots'\n"
    )
    assert not (Path.cwd() / "data").exists()


def test_markdown_is_the_docs_table(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGISTRY_MAX_MEMBERS", "12")  # the table shows defaults, not values
    run = cli("settings", "--markdown")
    assert run.code == 0, run.err
    assert run.out == markdown_table()
    assert "| `REGISTRY_MAX_MEMBERS` | `10000` |" in run.out


def test_serve_help_points_at_the_listing(cli) -> None:
    run = cli("serve", "--help")
    assert run.code == 0
    assert "carton-registry settings" in " ".join(run.out.split())
