"""Frozen settings read from ``REGISTRY_*`` environment variables, each written once.

A setting is a dataclass field whose metadata holds its parser and help text
(``setting()``). Every field of ``Settings`` is the variable ``REGISTRY_<FIELD>``;
``archive`` holds the one ``ArchiveLimits`` the registry opens uploads with, and each
of its fields is ``REGISTRY_<LIMIT>`` (``REGISTRY_MAX_MEMBERS``: the names the limits
always had). ``SETTINGS`` is that table, derived from the fields: ``from_env()`` reads
it, ``carton-registry settings`` prints it, and docs/operations.md lists it
(``scripts/settings_doc.py`` writes that list; a test checks it).

``Settings.from_env()`` reads the environment each time it is called (no import-time
caching), so tests and the CLI can build settings for any environment.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from registry.carton.limits import ArchiveLimits
from registry.carton.streams import GiB, KiB, MiB

DEFAULT_PORT = 8080
ENV_PREFIX = "REGISTRY_"

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}

T = TypeVar("T")


class SettingsError(ValueError):
    """A setting's value is refused; the message names its variable."""


def parse_duration(text: str) -> float:
    """Parse ``0s``, ``90s``, ``30m``, ``1h``, ``7d`` (a bare number is seconds)."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"not a duration: {text!r} (use e.g. 0s, 90s, 30m, 1h, 7d)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def parse_share(text: str) -> float:
    """Parse a share of a whole: ``2%`` or ``0.02`` (not negative)."""
    value = text.strip()
    try:
        share = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        raise ValueError(f"not a share: {text!r} (use e.g. 2% or 0.02)") from None
    if not share >= 0:
        raise ValueError(f"not a share: {text!r} (it cannot be negative)")
    return share


def format_duration(seconds: float) -> str:
    """``seconds`` as ``parse_duration`` reads it: ``3600`` -> ``1h``, ``60`` -> ``60s``."""
    for unit in ("d", "h", "m"):
        step = _UNITS[unit]
        if seconds % step == 0 and seconds >= (2 * step if unit == "m" else step):
            return f"{seconds / step:g}{unit}"
    return f"{seconds:g}s"


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***``, fit to print (database and store URLs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user, _, host = parts.netloc.rpartition("@")
    name = user.partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{name}:***@{host}"))


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"not a boolean: {text!r} (use true or false)")


def parse_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"not a whole number: {text!r}") from None


def parse_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"not a number: {text!r}") from None


def parse_hosts(text: str) -> tuple[str, ...]:
    """A comma-separated list: ``example.org, 127.0.0.1:8765``."""
    return tuple(h.strip() for h in text.split(",") if h.strip())


def _parser_for(default: object) -> Callable[[str], Any]:
    for kind, parse in (
        (bool, parse_bool),
        (int, parse_int),
        (float, parse_float),
        (str, str),
        (Path, Path),
    ):
        if isinstance(default, kind):
            return parse
    raise TypeError(f"a setting defaulting to {default!r} needs its parse= function")


def setting(
    default: T,
    help: str,
    *,
    parse: Callable[[str], Any] | None = None,
    shown: str | None = None,
    secret: bool = False,
) -> T:
    """A settings field: its default, the help text the listing and the docs print, its
    parser (by default the default's type: int, float, bool, str or Path) and how its
    default reads when it is not its plain value (``shown``)."""
    metadata = {
        "help": help,
        "parse": parse or _parser_for(default),
        "shown": shown,
        "secret": secret,
    }
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Settings:
    data_dir: Path = setting(
        Path("./data"),
        "the folder of the default database and blob store, relative to where `serve` starts",
        shown="./data",
    )
    database_url: str = setting(
        "",
        "the database: SQLite by default, or `postgresql://user@host/db` (psycopg 3)",
        shown="sqlite:///<data dir>/registry.db",
    )
    blob_store: str = setting(
        "",
        "the blob store: a folder by default (`file:///path`), or `s3://bucket/prefix` "
        "(with `S3_ENDPOINT_URL` for MinIO etc.)",
        shown="file://<data dir>/blobs",
    )
    s3_endpoint_url: str | None = setting(None, "S3 endpoint (MinIO etc.; unset: AWS)", parse=str)
    s3_presign_downloads: bool = setting(
        False,
        "`GET /blobs/{sha}` answers 307 to a presigned S3 URL (HEAD never redirects)",
    )
    public_url: str = setting(
        f"http://127.0.0.1:{DEFAULT_PORT}",
        "base of the URLs written into `LINKS` (`serve` defaults it to its own address)",
    )
    slim_inline_max_bytes: int = setting(64 * KiB, "files at or under it stay inside slim cartons")
    chunk_min_file_bytes: int = setting(
        64 * KiB,
        "files larger than this are stored as content-defined chunks in packs, others whole "
        "(docs/chunk-store.md)",
    )
    max_upload_bytes: int = setting(
        64 * GiB, "request body limit: a larger push or blob upload answers 413"
    )
    # Uploads are opened with these; each of its fields is a setting of its own.
    archive: ArchiveLimits = ArchiveLimits()
    max_v2_body_bytes: int = setting(
        256 * MiB,
        "v2 load bodies (JSON with base64 files, parsed in memory); verify bodies are "
        "bounded by their self test's expected outputs + 1 MiB, never above this",
    )
    link_fetch_allow: tuple[str, ...] = setting(
        (),
        "hosts `LINKS` may be fetched from at push (`host`, `host:port`, comma-separated; "
        "`*` = any public host)",
        parse=parse_hosts,
        shown="none",
    )
    link_fetch_timeout: float = setting(
        30.0,
        "timeout of each LINKS fetch at push (past it the push answers 422)",
        parse=parse_duration,
    )
    auth: str = setting("off", "`off`, `write` (writes need a token) or `all`")
    allow_insecure_bind: bool = setting(
        False, "let `serve` listen on a non-loopback address with `AUTH=off`"
    )
    token: str | None = setting(
        None,
        "bearer token the CLI sends (wins over the one `login` saved)",
        parse=str,
        secret=True,
    )
    migrate_on_start: bool = setting(True, "`serve` migrates the database (under a lock)")
    lease_timeout: float = setting(
        60.0,
        "a push whose heartbeat is older is dead (GC may collect its orphans)",
        parse=parse_duration,
    )
    gc_grace: float = setting(
        3600.0, "default grace period of `carton-registry gc`", parse=parse_duration
    )
    signed_url_ttl: float = setting(
        7 * 86400.0,
        "lifetime of the signed LINKS URLs in private models' slim cartons",
        parse=parse_duration,
        shown="7d",
    )
    secret_key: str | None = setting(
        None,
        "the key signed LINKS URLs are signed with (default: generated into "
        "`<data dir>/secret_key`); app servers sharing a database must share it",
        parse=str,
        secret=True,
    )
    # GC rewrites packs holding dead chunks until at most this share of the live bytes
    # (plus 1 MiB) stays dead in them, as restic's ``prune --max-unused`` does.
    gc_max_unused: float = setting(
        0.02,
        "dead chunk bytes `gc` may leave in packs, as a share of the live bytes (plus 1 MiB); "
        "it rewrites packs until then (`2%` or `0.02`)",
        parse=parse_share,
        shown="2%",
    )
    max_concurrent_pushes: int = setting(
        4,
        "ingests (pushes, blob and chunk uploads, assemblies, v2 loads) at once per process; "
        "more queue",
    )
    ingest_queue_timeout: float = setting(
        10.0,
        "how long an ingest waits for a slot before answering 503 with `Retry-After`",
        parse=parse_duration,
    )
    # Slow clients: a connection whose request headers take longer is closed, and an
    # upload that sends nothing for body_idle_timeout is cut off (408).
    header_timeout: float = setting(
        30.0,
        "a connection whose request headers are not complete by then is closed",
        parse=parse_duration,
    )
    body_idle_timeout: float = setting(
        60.0,
        "an upload body that sends nothing for this long answers 408 and is closed",
        parse=parse_duration,
    )
    keep_alive_timeout: float = setting(
        75.0,
        "idle keep-alive connections are closed (above common balancers' 60 s)",
        parse=parse_duration,
    )
    # Slow bodies (registry.http.pace): every body_rate_window of an upload must bring
    # body_min_rate bytes a second, and after its first window the whole body must average
    # body_deadline_rate. Time the registry itself holds a body back is not counted.
    body_min_rate: int = setting(
        16 * KiB,
        "bytes/s an upload body must bring in every `BODY_RATE_WINDOW`, or answer 408 and "
        "be closed (`0`: off)",
    )
    body_rate_window: float = setting(
        60.0, "the sliding window of `BODY_MIN_RATE`", parse=parse_duration
    )
    body_deadline_rate: int = setting(
        32 * KiB,
        "bytes/s an upload body must average after its first window: one of N bytes has "
        "`BODY_RATE_WINDOW` + N / rate to arrive (408; `0`: off)",
    )
    max_concurrent_pushes_per_client: int = setting(
        2,
        "of those ingest slots, one client's (its token; its address when anonymous) at "
        "once; its others wait for its own (`0`: no such limit)",
    )
    # Assembly from stored chunks (all-zero regions repeat one chunk; docs/chunk-transfer.md).
    max_assemble_ratio: float = setting(
        100.0,
        "a file assembled from chunks is at most this many times the bytes of its distinct "
        "chunks past its first `ASSEMBLE_RATIO_MIN_BYTES` (413; the CLI then sends it whole)",
    )
    assemble_ratio_min_bytes: int = setting(GiB, "see `MAX_ASSEMBLE_RATIO`")
    scrub_rate: int = setting(
        0,
        "bytes/s each server process re-reads and checks from the packs in the background "
        '(`0`: off; docs/operations.md, "Scrub")',
    )

    def __post_init__(self) -> None:
        if not self.database_url:
            object.__setattr__(
                self, "database_url", f"sqlite:///{(self.data_dir / 'registry.db').resolve()}"
            )
        if not self.blob_store:
            object.__setattr__(self, "blob_store", f"file://{(self.data_dir / 'blobs').resolve()}")
        if self.max_concurrent_pushes < 1:
            raise SettingsError("REGISTRY_MAX_CONCURRENT_PUSHES must be at least 1")
        if self.max_concurrent_pushes_per_client < 0:
            raise SettingsError("REGISTRY_MAX_CONCURRENT_PUSHES_PER_CLIENT must be 0 (off) or more")
        if self.scrub_rate < 0:
            raise SettingsError(
                "REGISTRY_SCRUB_RATE must be 0 (off) or a number of bytes per second"
            )
        if self.auth not in {"off", "write", "all"}:
            raise SettingsError(f"REGISTRY_AUTH must be off, write or all, not {self.auth!r}")
        object.__setattr__(self, "public_url", self.public_url.rstrip("/"))

    def replace(self, **changes: object) -> Settings:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]  # any field by name

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Settings from ``REGISTRY_*`` variables (empty ones unset); ``overrides`` (fields
        by name) win. A value that does not parse is a SettingsError naming its variable."""
        env = os.environ if env is None else env
        values: dict[str, dict[str, object]] = {}
        for item in SETTINGS:
            text = env.get(item.env)
            if text in (None, ""):
                continue
            try:
                value = item.parse(text)
            except ValueError as exc:
                raise SettingsError(f"{item.env}={text!r}: {exc}") from None
            values.setdefault(item.group, {})[item.name] = value
        fields: dict[str, object] = values.pop("", {})
        for group, limits in values.items():
            default = getattr(cls, group)  # the field's default, held by the class
            fields[group] = dataclasses.replace(default, **limits)
        fields.update(overrides)
        return cls(**fields)  # type: ignore[arg-type]  # fields by name, parsed above


@dataclass(frozen=True)
class Setting:
    """One row of the settings table: a field of ``Settings`` (``group`` empty) or of a
    dataclass it holds (``group``: the holding field, e.g. ``archive``)."""

    env: str
    group: str
    name: str
    default: object
    parse: Callable[[str], Any]
    help: str
    shown: str | None
    secret: bool

    def value(self, settings: Settings) -> object:
        holder = getattr(settings, self.group) if self.group else settings
        return getattr(holder, self.name)


def _table() -> tuple[Setting, ...]:
    rows: list[Setting] = []
    for f in dataclasses.fields(Settings):
        if dataclasses.is_dataclass(f.default):
            rows += (_row(g, f.name) for g in dataclasses.fields(f.default))
        else:
            rows.append(_row(f, ""))
    names = [r.env for r in rows]
    if len(set(names)) != len(names):  # pragma: no cover - a field named like another's
        raise TypeError(f"two settings share a variable: {sorted(names)}")
    return tuple(rows)


def _row(f: dataclasses.Field[Any], group: str) -> Setting:
    if "help" not in f.metadata:  # pragma: no cover - caught by the first import
        raise TypeError(f"setting {f.name!r} has no help text in its field metadata")
    return Setting(
        env=ENV_PREFIX + f.name.upper(),
        group=group,
        name=f.name,
        default=f.default,
        parse=f.metadata.get("parse") or _parser_for(f.default),
        help=f.metadata["help"],
        shown=f.metadata.get("shown"),
        secret=bool(f.metadata.get("secret")),
    )


SETTINGS: tuple[Setting, ...] = _table()
"""Every setting, in field order: what ``from_env`` reads and the listings print."""
