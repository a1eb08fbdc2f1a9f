from __future__ import annotations

from pathlib import Path

import pytest

from registry.carton.streams import GiB
from registry.settings import Settings, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0s", 0), ("90s", 90), ("30m", 1800), ("1h", 3600), ("7d", 604800), ("15", 15)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1w", "-1s", "h", "1 hour"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_defaults_are_embedded(tmp_path: Path) -> None:
    s = Settings.from_env({"REGISTRY_DATA_DIR": str(tmp_path)})
    assert s.database_url == f"sqlite:///{(tmp_path / 'registry.db').resolve()}"
    assert s.blob_store == f"file://{(tmp_path / 'blobs').resolve()}"
    assert s.max_upload_bytes == 64 * GiB
    assert s.max_members == 10_000
    assert s.slim_inline_max_bytes == 65536
    assert s.auth == "off"
    assert s.link_fetch_allow == ()
    assert s.migrate_on_start is True


def test_environment_read_each_time(tmp_path: Path) -> None:
    env = {
        "REGISTRY_DATA_DIR": str(tmp_path),
        "REGISTRY_LINK_FETCH_ALLOW": "example.org, 127.0.0.1:8765",
        "REGISTRY_AUTH": "write",
        "REGISTRY_MIGRATE_ON_START": "false",
        "REGISTRY_LEASE_TIMEOUT": "90s",
        "REGISTRY_PUBLIC_URL": "https://models.example.org/",
    }
    s = Settings.from_env(env)
    assert s.link_fetch_allow == ("example.org", "127.0.0.1:8765")
    assert s.auth == "write"
    assert s.migrate_on_start is False
    assert s.lease_timeout == 90
    assert s.public_url == "https://models.example.org"


def test_bad_auth_value_is_refused() -> None:
    with pytest.raises(ValueError, match="REGISTRY_AUTH"):
        Settings.from_env({"REGISTRY_AUTH": "maybe"})


def test_redact_url_hides_passwords_only():
    from registry.settings import redact_url

    assert (
        redact_url("postgresql://reg:s3cret@db:5432/registry")
        == "postgresql://reg:***@db:5432/registry"
    )
    assert redact_url("postgresql://reg@db/registry") == "postgresql://reg@db/registry"
    assert redact_url("sqlite:////var/lib/registry.db") == "sqlite:////var/lib/registry.db"
    assert redact_url("s3://bucket/prefix?region=eu") == "s3://bucket/prefix?region=eu"
