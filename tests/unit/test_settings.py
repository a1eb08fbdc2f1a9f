from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path

import pytest

from registry.carton.limits import ArchiveLimits
from registry.carton.streams import GiB
from registry.settings import (
    SETTINGS,
    Setting,
    Settings,
    SettingsError,
    format_duration,
    parse_duration,
    parse_share,
)
from tests.conftest import REPO_ROOT


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


@pytest.mark.parametrize(("text", "share"), [("2%", 0.02), ("0.02", 0.02), ("0", 0), ("150%", 1.5)])
def test_shares(text: str, share: float) -> None:
    assert parse_share(text) == pytest.approx(share)


@pytest.mark.parametrize("text", ["", "%", "-1%", "two", "nan"])
def test_bad_shares(text: str) -> None:
    with pytest.raises(ValueError, match="not a share"):
        parse_share(text)


def test_gc_max_unused_from_the_environment(tmp_path: Path) -> None:
    assert Settings.from_env({"REGISTRY_DATA_DIR": str(tmp_path)}).gc_max_unused == 0.02
    env = {"REGISTRY_DATA_DIR": str(tmp_path), "REGISTRY_GC_MAX_UNUSED": "10%"}
    assert Settings.from_env(env).gc_max_unused == pytest.approx(0.1)
    with pytest.raises(ValueError, match="not a share"):
        Settings.from_env({**env, "REGISTRY_GC_MAX_UNUSED": "lots"})


def test_defaults_are_embedded(tmp_path: Path) -> None:
    s = Settings.from_env({"REGISTRY_DATA_DIR": str(tmp_path)})
    assert s.database_url == f"sqlite:///{(tmp_path / 'registry.db').resolve()}"
    assert s.blob_store == f"file://{(tmp_path / 'blobs').resolve()}"
    assert s.max_upload_bytes == 64 * GiB
    assert s.archive.max_members == 10_000
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


# --- one table: every field is a variable, every variable a field -----------------------

# Every variable the registry read before the table was derived from the fields (README,
# docs/, compose.yaml, Dockerfile and tests use them): each must keep working.
NAMES_IN_USE = [
    "DATA_DIR",
    "DATABASE_URL",
    "BLOB_STORE",
    "S3_ENDPOINT_URL",
    "PUBLIC_URL",
    "AUTH",
    "TOKEN",
    "SLIM_INLINE_MAX_BYTES",
    "CHUNK_MIN_FILE_BYTES",
    "MAX_UPLOAD_BYTES",
    "MAX_UNPACKED_BYTES",
    "MAX_MEMBERS",
    "MAX_CARTON_TOML_BYTES",
    "MAX_V2_BODY_BYTES",
    "MAX_CONCURRENT_PUSHES",
    "MAX_CONCURRENT_PUSHES_PER_CLIENT",
    "BODY_MIN_RATE",
    "BODY_DEADLINE_RATE",
    "ASSEMBLE_RATIO_MIN_BYTES",
    "MAX_COMPRESSION_RATIO",
    "MAX_EXPANSION_RATIO",
    "MAX_ASSEMBLE_RATIO",
    "LINK_FETCH_TIMEOUT",
    "LEASE_TIMEOUT",
    "GC_GRACE",
    "INGEST_QUEUE_TIMEOUT",
    "HEADER_TIMEOUT",
    "BODY_IDLE_TIMEOUT",
    "KEEP_ALIVE_TIMEOUT",
    "BODY_RATE_WINDOW",
    "LINK_FETCH_ALLOW",
    "MIGRATE_ON_START",
    "S3_PRESIGN_DOWNLOADS",
    "ALLOW_INSECURE_BIND",
]

# REGISTRY_* variables that are not server settings: the CLI's, `serve`'s hand-off to its
# workers, and the tests' (REGISTRY_TEST_* too).
NOT_SETTINGS = {
    "REGISTRY_URL",
    "REGISTRY_CACHE_MAX_BYTES",
    "REGISTRY_SERVE_LOG_LEVEL",
    "REGISTRY_SERVE_SERVER",
    "REGISTRY_UPDATE_SCREENSHOTS",
}
VARIABLE = re.compile(r"(?<![A-Z0-9_])REGISTRY_[A-Z0-9_]*[A-Z0-9]")


def by_env() -> dict[str, Setting]:
    return {item.env: item for item in SETTINGS}


def test_every_field_is_a_variable_named_after_it() -> None:
    fields = [f.name for f in dataclasses.fields(Settings) if f.name != "archive"]
    limits = [f.name for f in dataclasses.fields(ArchiveLimits)]
    assert sorted(item.name for item in SETTINGS) == sorted(fields + limits)
    for item in SETTINGS:
        assert item.env == "REGISTRY_" + item.name.upper()
        assert item.group == ("archive" if item.name in limits else "")
        assert item.help.strip(), f"{item.env} has no help text"


def test_the_names_in_use_keep_working() -> None:
    missing = [name for name in NAMES_IN_USE if f"REGISTRY_{name}" not in by_env()]
    assert missing == []


def test_the_docs_name_only_variables_something_reads() -> None:
    used: set[str] = set()
    for path in [REPO_ROOT / "README.md", REPO_ROOT / "compose.yaml", REPO_ROOT / "Dockerfile"]:
        used |= set(VARIABLE.findall(path.read_text()))
    for path in (REPO_ROOT / "docs").glob("*.md"):
        used |= set(VARIABLE.findall(path.read_text()))
    unknown = sorted(
        name
        for name in used - set(by_env()) - NOT_SETTINGS
        if not name.startswith("REGISTRY_TEST_")
    )
    assert unknown == []


def sample(item: Setting) -> tuple[str, object]:
    """A value unlike the default, as written in the environment and as parsed."""
    if item.name == "auth":
        return "all", "all"
    if isinstance(item.default, bool):
        return ("off", False) if item.default else ("yes", True)
    if item.parse is parse_duration:
        return "90m", 5400.0
    if isinstance(item.default, int):
        return str(item.default + 3), item.default + 3
    if isinstance(item.default, float):
        return "2.5", 2.5
    if isinstance(item.default, tuple):
        return "a.example, b.example:8443", ("a.example", "b.example:8443")
    if isinstance(item.default, Path):
        return "/srv/registry", Path("/srv/registry")
    return "http://s3.example:9000", "http://s3.example:9000"


@pytest.mark.parametrize("item", SETTINGS, ids=lambda item: item.env)
def test_every_variable_is_read(item: Setting) -> None:
    text, expected = sample(item)
    assert expected != item.default
    assert item.value(Settings.from_env({item.env: text})) == expected


@pytest.mark.parametrize("item", SETTINGS, ids=lambda item: item.env)
def test_an_empty_variable_is_unset(item: Setting) -> None:
    assert Settings.from_env({item.env: ""}) == Settings()


def test_the_archive_limits_are_one_object_held_not_copied(tmp_path: Path) -> None:
    """The limits the registry opens uploads with are the settings' own, variables
    without a field of their own (the two floors) included."""
    from registry.services.context import RegistryContext

    env = {
        "REGISTRY_DATA_DIR": str(tmp_path),
        "REGISTRY_MAX_MEMBERS": "12",
        "REGISTRY_EXPANSION_MIN_BYTES": "4096",
        "REGISTRY_COMPRESSION_RATIO_MIN_BYTES": "8192",
    }
    settings = Settings.from_env(env)
    assert settings.archive == ArchiveLimits(
        max_members=12, expansion_min_bytes=4096, compression_ratio_min_bytes=8192
    )
    ctx = RegistryContext.open(settings)
    try:
        assert ctx.archive_limits is settings.archive
    finally:
        ctx.close()


def test_overrides_win_over_the_environment() -> None:
    limits = ArchiveLimits(max_members=3)
    s = Settings.from_env({"REGISTRY_MAX_MEMBERS": "12", "REGISTRY_AUTH": "all"}, archive=limits)
    assert s.archive is limits
    assert s.auth == "all"


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"REGISTRY_MAX_MEMBERS": "many"}, "REGISTRY_MAX_MEMBERS='many': not a whole number"),
        ({"REGISTRY_MAX_EXPANSION_RATIO": "x"}, "REGISTRY_MAX_EXPANSION_RATIO='x': not a number"),
        ({"REGISTRY_GC_GRACE": "1 week"}, "REGISTRY_GC_GRACE='1 week': not a duration"),
        ({"REGISTRY_MIGRATE_ON_START": "perhaps"}, "REGISTRY_MIGRATE_ON_START='perhaps'"),
        ({"REGISTRY_MAX_CONCURRENT_PUSHES": "0"}, "REGISTRY_MAX_CONCURRENT_PUSHES must be"),
    ],
)
def test_a_bad_value_names_its_variable(env: dict[str, str], words: str) -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env(env)
    assert str(raised.value).startswith(words)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (30, "30s"), (60, "60s"), (90, "90s"), (1800, "30m"), (3600, "1h"), (86400, "1d")],
)
def test_durations_are_shown_as_they_are_written(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


# --- docs/operations.md lists the table ------------------------------------------------


def settings_doc():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "settings_doc", REPO_ROOT / "scripts" / "settings_doc.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_operations_doc_lists_exactly_the_settings() -> None:
    doc = settings_doc()
    text = doc.DOC.read_text()
    listed = re.findall(r"^\| `(REGISTRY_[A-Z0-9_]+)` \|", text.split(doc.BEGIN)[1], re.M)
    assert listed == [item.env for item in SETTINGS]
    assert doc.updated(text) == text, "docs/operations.md is out of date: scripts/settings_doc.py"
