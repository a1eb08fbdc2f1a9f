"""Tokens saved per registry URL: where the file lives, who may read it, how URLs match."""

from __future__ import annotations

import json
import stat
import sys

import pytest

from registry.client import ClientError, credentials


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    return tmp_path / "cfg"


def test_the_config_folder_of_each_platform(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    assert credentials.config_dir() == tmp_path / ".config"
    monkeypatch.setattr(sys, "platform", "darwin")
    assert credentials.config_dir() == tmp_path / "Library" / "Application Support"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert (
        credentials.credentials_path() == tmp_path / "xdg" / "carton-registry" / "credentials.json"
    )


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/"),
        ("HTTPS://Registry.Example.org", "https://registry.example.org:443/"),
        ("http://[::1]:8080/reg/", "http://[::1]:8080/reg"),
    ],
)
def test_one_key_per_registry_however_its_url_is_spelled(a, b):
    assert credentials.registry_key(a) == credentials.registry_key(b)


def test_store_read_and_forget(config):
    assert credentials.stored_token("http://a.test") is None
    path = credentials.store_token("http://a.test", "crt_a")
    credentials.store_token("http://b.test:9000", "crt_b")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert credentials.stored_token("http://a.test/") == "crt_a"
    assert credentials.stored_token("http://b.test:9000") == "crt_b"
    assert credentials.forget_token("http://a.test") is True
    assert credentials.forget_token("http://a.test") is False
    assert credentials.stored_token("http://a.test") is None
    assert credentials.stored_token("http://b.test:9000") == "crt_b"
    assert list(path.parent.iterdir()) == [path]  # no temp files left behind
    assert set(json.loads(path.read_text())["registries"]) == {"http://b.test:9000"}


def test_a_damaged_file_is_a_clear_error(config):
    path = config / "carton-registry" / "credentials.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(ClientError, match=r"credentials file .* is damaged"):
        credentials.stored_token("http://a.test")
