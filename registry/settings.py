"""Frozen settings read from ``REGISTRY_*`` environment variables.

``Settings.from_env()`` reads the environment each time it is called (no
import-time caching), so tests and the CLI can build settings for any
environment.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from registry.carton.limits import ArchiveLimits
from registry.carton.streams import GiB, KiB, MiB

_ARCHIVE = ArchiveLimits()  # the archive limits' defaults are the registry's
DEFAULT_PORT = 8080

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """Parse ``0s``, ``90s``, ``30m``, ``1h``, ``7d`` (a bare number is seconds)."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"not a duration: {text!r} (use e.g. 0s, 90s, 30m, 1h, 7d)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***``, fit to print (database and store URLs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user, _, host = parts.netloc.rpartition("@")
    name = user.partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{name}:***@{host}"))


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"not a boolean: {text!r}")


@dataclass(frozen=True)
class Settings:
    data_dir: Path = Path("./data")
    database_url: str = ""
    blob_store: str = ""
    s3_endpoint_url: str | None = None
    s3_presign_downloads: bool = False
    public_url: str = f"http://127.0.0.1:{DEFAULT_PORT}"
    slim_inline_max_bytes: int = 64 * KiB
    # Files larger than this are stored as content-defined chunks in packs; others whole.
    chunk_min_file_bytes: int = 64 * KiB
    max_upload_bytes: int = 64 * GiB
    max_unpacked_bytes: int = _ARCHIVE.max_unpacked_bytes
    max_members: int = _ARCHIVE.max_members
    max_compression_ratio: float = _ARCHIVE.max_compression_ratio
    compression_ratio_min_bytes: int = _ARCHIVE.compression_ratio_min_bytes
    max_expansion_ratio: float = _ARCHIVE.max_expansion_ratio
    expansion_min_bytes: int = _ARCHIVE.expansion_min_bytes
    max_carton_toml_bytes: int = _ARCHIVE.max_carton_toml_bytes
    # v2 load and verify bodies are JSON (base64 files) parsed in memory: their own limit.
    max_v2_body_bytes: int = 256 * MiB
    link_fetch_allow: tuple[str, ...] = ()
    link_fetch_timeout: float = 30.0
    auth: str = "off"
    allow_insecure_bind: bool = False
    token: str | None = None
    migrate_on_start: bool = True
    lease_timeout: float = 60.0
    gc_grace: float = 3600.0
    # Overload: ingests (pushes, blob uploads, v2 loads: every upload) run at most this many
    # at once per process; more wait up to ingest_queue_timeout, then answer 503 with
    # Retry-After.
    max_concurrent_pushes: int = 4
    ingest_queue_timeout: float = 10.0
    # Slow clients: a connection whose request headers take longer is closed, and an
    # upload that sends nothing for body_idle_timeout is cut off (408).
    header_timeout: float = 30.0
    body_idle_timeout: float = 60.0
    keep_alive_timeout: float = 75.0

    def __post_init__(self) -> None:
        if not self.database_url:
            object.__setattr__(
                self, "database_url", f"sqlite:///{(self.data_dir / 'registry.db').resolve()}"
            )
        if not self.blob_store:
            object.__setattr__(self, "blob_store", f"file://{(self.data_dir / 'blobs').resolve()}")
        if self.max_concurrent_pushes < 1:
            raise ValueError("REGISTRY_MAX_CONCURRENT_PUSHES must be at least 1")
        if self.auth not in {"off", "write", "all"}:
            raise ValueError(f"REGISTRY_AUTH must be off, write or all, not {self.auth!r}")
        object.__setattr__(self, "public_url", self.public_url.rstrip("/"))

    def replace(self, **changes: object) -> Settings:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        env = os.environ if env is None else env

        def get(name: str) -> str | None:
            value = env.get(f"REGISTRY_{name}")
            return value if value not in (None, "") else None

        values: dict[str, object] = {}
        if (v := get("DATA_DIR")) is not None:
            values["data_dir"] = Path(v)
        for name, key in [
            ("DATABASE_URL", "database_url"),
            ("BLOB_STORE", "blob_store"),
            ("S3_ENDPOINT_URL", "s3_endpoint_url"),
            ("PUBLIC_URL", "public_url"),
            ("AUTH", "auth"),
            ("TOKEN", "token"),
        ]:
            if (v := get(name)) is not None:
                values[key] = v
        for name, key in [
            ("SLIM_INLINE_MAX_BYTES", "slim_inline_max_bytes"),
            ("CHUNK_MIN_FILE_BYTES", "chunk_min_file_bytes"),
            ("MAX_UPLOAD_BYTES", "max_upload_bytes"),
            ("MAX_UNPACKED_BYTES", "max_unpacked_bytes"),
            ("MAX_MEMBERS", "max_members"),
            ("MAX_CARTON_TOML_BYTES", "max_carton_toml_bytes"),
            ("MAX_V2_BODY_BYTES", "max_v2_body_bytes"),
            ("MAX_CONCURRENT_PUSHES", "max_concurrent_pushes"),
        ]:
            if (v := get(name)) is not None:
                values[key] = int(v)
        if (v := get("MAX_COMPRESSION_RATIO")) is not None:
            values["max_compression_ratio"] = float(v)
        if (v := get("MAX_EXPANSION_RATIO")) is not None:
            values["max_expansion_ratio"] = float(v)
        if (v := get("LINK_FETCH_TIMEOUT")) is not None:
            values["link_fetch_timeout"] = parse_duration(v)
        if (v := get("LEASE_TIMEOUT")) is not None:
            values["lease_timeout"] = parse_duration(v)
        for name, key in [
            ("GC_GRACE", "gc_grace"),
            ("INGEST_QUEUE_TIMEOUT", "ingest_queue_timeout"),
            ("HEADER_TIMEOUT", "header_timeout"),
            ("BODY_IDLE_TIMEOUT", "body_idle_timeout"),
            ("KEEP_ALIVE_TIMEOUT", "keep_alive_timeout"),
        ]:
            if (v := get(name)) is not None:
                values[key] = parse_duration(v)
        if (v := get("LINK_FETCH_ALLOW")) is not None:
            values["link_fetch_allow"] = tuple(h.strip() for h in v.split(",") if h.strip())
        for name, key in [
            ("MIGRATE_ON_START", "migrate_on_start"),
            ("S3_PRESIGN_DOWNLOADS", "s3_presign_downloads"),
            ("ALLOW_INSECURE_BIND", "allow_insecure_bind"),
        ]:
            if (v := get(name)) is not None:
                values[key] = _bool(v)
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]
