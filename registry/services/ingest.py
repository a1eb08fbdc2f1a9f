"""Push: explode a carton into the blob store, verify every byte, index it in one transaction.

Order matters: archive distrust and carton.toml validation first (nothing
written yet, here), then the bytes (``ingest_bytes``: each blob verified against
its MANIFEST sha256 as it is written), then the rows (``ingest_rows``), in one
transaction. A failure after bytes were written leaves only unreferenced blobs,
which GC collects after its grace period.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.exc import IntegrityError

from registry.carton.config import CartonConfig, parse_carton_toml, validate_references
from registry.carton.manifest import Manifest
from registry.carton.paths import CARTON_TOML, TENSOR_INDEX
from registry.carton.tensor_data import parse_tensor_index
from registry.carton.zipread import CartonArchive
from registry.errors import ArchiveTooLarge, InvalidCarton, ModelNameRequired
from registry.services.blobs import stored_subset
from registry.services.context import RegistryContext
from registry.services.ingest_bytes import known_blobs, store_blobs
from registry.services.ingest_rows import index_carton
from registry.services.leases import Lease, lock_blobs_shared
from registry.services.names import validate_model_name, validate_tag_name
from registry.services.observers import notify


@dataclass
class PushResult:
    manifest_sha256: str
    model_name: str | None
    version: int | None
    files: int
    bytes_total: int
    bytes_new: int
    bytes_deduplicated: int
    created: bool = field(default=False)
    seconds: float = field(default=0.0)

    def as_json(self) -> dict[str, Any]:
        body = asdict(self)
        body.pop("created")
        body.pop("seconds")
        return body


def ingest_file(
    ctx: RegistryContext,
    path: Path,
    *,
    model_name: str | None = None,
    tag: str | None = None,
) -> PushResult:
    """Push the carton at ``path`` (a local file: a spooled upload or a CLI argument)."""
    started = time.monotonic()
    with CartonArchive.open(path, ctx.archive_limits) as archive:
        result = _ingest_archive(ctx, archive, model_name=model_name, tag=tag)
    result.seconds = time.monotonic() - started
    notify(ctx.observers.push, result)
    return result


def _ingest_archive(
    ctx: RegistryContext, archive: CartonArchive, *, model_name: str | None, tag: str | None
) -> PushResult:
    manifest = archive.manifest
    if manifest.get(CARTON_TOML) is None:
        raise InvalidCarton("MANIFEST has no carton.toml entry")
    present = set(archive.present_paths())
    limit = ctx.settings.max_carton_toml_bytes
    config: CartonConfig | None = None
    if CARTON_TOML in present:
        toml_bytes = archive.read_bytes(CARTON_TOML, limit)
        index_bytes = archive.read_bytes(TENSOR_INDEX, limit) if TENSOR_INDEX in present else None
        config = _parse_config(manifest, toml_bytes, index_bytes)
    if config is not None:
        name = _choose_name(config, model_name, tag)

    by_sha: dict[str, list[str]] = {}
    for entry in manifest.entries:
        by_sha.setdefault(entry.sha256, []).append(entry.path)

    with Lease(ctx.sessions, ctx.settings.lease_timeout) as lease:
        with ctx.transaction() as session:
            lock_blobs_shared(session)
            lease.add(session, by_sha)
            known = known_blobs(session, by_sha)
        # A row whose object was lost (disk or bucket incident, found by fsck) is not a
        # source: the push rewrites it from the zip, or resolves it like any missing file.
        # Leased already, so GC cannot remove what we find here.
        lost = set(known) - stored_subset(ctx, known)
        known = {sha: facts for sha, facts in known.items() if sha not in lost}
        facts = store_blobs(ctx, archive, by_sha, present, known)

        if config is None:
            # carton.toml was not inside the zip: validate it now that it is stored.
            toml_bytes = _read_stored(ctx, manifest, CARTON_TOML)
            index_bytes = (
                _read_stored(ctx, manifest, TENSOR_INDEX)
                if manifest.get(TENSOR_INDEX) is not None
                else None
            )
            config = _parse_config(manifest, toml_bytes, index_bytes)
            name = _choose_name(config, model_name, tag)

        files = len(manifest.entries)
        bytes_total = sum(facts[e.sha256].size for e in manifest.entries)
        bytes_new = sum(f.size for f in facts.values() if f.new)
        for attempt in range(3):
            try:
                with ctx.transaction() as session:
                    created, name, version = index_carton(
                        session, manifest, config, toml_bytes, facts, name, tag
                    )
                    lease.release(session)
                ctx.caches.index_changed()
                break
            except IntegrityError:
                # A concurrent push of the same manifest or model won the race: read it again.
                if attempt == 2:
                    raise
    return PushResult(
        manifest_sha256=manifest.sha256,
        model_name=name,
        version=version,
        files=files,
        bytes_total=bytes_total,
        bytes_new=bytes_new,
        bytes_deduplicated=bytes_total - bytes_new,
        created=created,
    )


def _choose_name(config: CartonConfig, model_name: str | None, tag: str | None) -> str | None:
    name = config.model_name or model_name
    if tag is not None:
        validate_tag_name(tag)
        if name is None:
            raise ModelNameRequired(
                "a tag needs a model name: carton.toml has no model_name and no ?model= was given"
            )
    return validate_model_name(name) if name is not None else None


def _parse_config(manifest: Manifest, toml_bytes: bytes, index_bytes: bytes | None) -> CartonConfig:
    """carton.toml parsed and its @tensor_data/@misc references checked against the carton."""
    config = parse_carton_toml(toml_bytes)
    names = {t.name for t in parse_tensor_index(index_bytes)} if index_bytes is not None else set()
    if index_bytes is None and manifest.get(TENSOR_INDEX) is not None:
        raise InvalidCarton(f"{TENSOR_INDEX} could not be read")
    _check_references(config, manifest, names)
    return config


def _read_stored(ctx: RegistryContext, manifest: Manifest, path: str) -> bytes:
    entry = manifest.get(path)
    assert entry is not None
    limit = ctx.settings.max_carton_toml_bytes
    size = ctx.blobs.stat(entry.sha256) or 0
    if size > limit:
        raise ArchiveTooLarge(f"{path} is {size} bytes, over the {limit}-byte limit")
    return b"".join(ctx.blobs.iter_chunks(entry.sha256))


def _check_references(config: CartonConfig, manifest: Manifest, tensor_names: set[str]) -> None:
    problems = validate_references(config, tensor_names, {e.path for e in manifest.entries})
    if problems:
        raise InvalidCarton(f"{CARTON_TOML}: " + "; ".join(problems))
