"""Push: explode a carton into the blob store, verify every byte, index it in one transaction.

Order matters: archive distrust and carton.toml validation first (nothing
written yet), then the bytes (each blob verified against its MANIFEST sha256
as it is written), then the rows, in one transaction. A failure after bytes
were written leaves only unreferenced blobs, which GC collects after its
grace period.
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from registry.blobstore import BlobDigestMismatch, BlobNotFound
from registry.carton.config import CartonConfig, parse_carton_toml, validate_references
from registry.carton.manifest import Manifest
from registry.carton.paths import CARTON_TOML, TENSOR_INDEX
from registry.carton.streams import ChecksumReader, IteratorReader
from registry.carton.tensor_data import parse_tensor_index
from registry.carton.zipread import CartonArchive, sha256_member
from registry.db.queries import in_chunks, insert_ignore
from registry.db.tables import Blob, Carton, CartonFile, Model, Tag, Version, utcnow
from registry.errors import (
    ArchiveTooLarge,
    InvalidCarton,
    LinkFetchFailed,
    ManifestMismatch,
    ModelNameRequired,
)
from registry.services.blobs import stored_subset
from registry.services.context import RegistryContext
from registry.services.leases import Lease, lock_blobs_shared
from registry.services.linkfetch import (
    LinkPolicy,
    LinkRefused,
    describe_failures,
    iter_link,
    make_client,
)
from registry.services.listing import refresh_model_listing
from registry.services.names import validate_model_name, validate_tag_name
from registry.services.observers import notify

log = logging.getLogger("registry.ingest")

# hashlib and zlib release the GIL: one worker per core hashes and writes in parallel.
INGEST_WORKERS = max(1, min(4, os.cpu_count() or 1))


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


@dataclass
class _BlobFacts:
    size: int
    crc32: int
    new: bool


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
            known = _known_blobs(session, by_sha)
        # A row whose object was lost (disk or bucket incident, found by fsck) is not a
        # source: the push rewrites it from the zip, or resolves it like any missing file.
        # Leased already, so GC cannot remove what we find here.
        lost = set(known) - stored_subset(ctx, known)
        known = {sha: facts for sha, facts in known.items() if sha not in lost}
        facts = _store_blobs(ctx, archive, by_sha, present, known)

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
                    created, name, version = _index(
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


def _known_blobs(session: Session, by_sha: dict[str, list[str]]) -> dict[str, tuple[int, int]]:
    hashes = list(by_sha)
    known: dict[str, tuple[int, int]] = {}
    for chunk in in_chunks(hashes):
        rows = session.execute(
            select(Blob.sha256, Blob.size, Blob.crc32).where(Blob.sha256.in_(chunk))
        )
        known.update({r.sha256: (r.size, r.crc32) for r in rows})
    return known


def _store_blobs(
    ctx: RegistryContext,
    archive: CartonArchive,
    by_sha: dict[str, list[str]],
    present: set[str],
    known: dict[str, tuple[int, int]],
) -> dict[str, _BlobFacts]:
    """Verify every member in the zip and store the new ones, a few blobs at a time.

    hashlib and zlib release the GIL, so worker threads hash and write on
    every core; the first failure cancels the rest and rejects the push.
    """
    in_zip = {sha: [p for p in paths if p in present] for sha, paths in by_sha.items()}
    work = [sha for sha in by_sha if in_zip[sha]]
    # Absent from the zip but already indexed (a slim or client-deduplicated push):
    # the row has size and CRC, nothing to read.
    facts: dict[str, _BlobFacts] = {
        sha: _BlobFacts(*known[sha], new=False)
        for sha in by_sha
        if not in_zip[sha] and sha in known
    }
    unresolved = [sha for sha in by_sha if not in_zip[sha] and sha not in known]

    def store_one(sha: str) -> _BlobFacts:
        paths = in_zip[sha]
        if sha in known:
            for p in paths:
                _verify_member(archive, p, sha)
            size, crc = known[sha]
            return _BlobFacts(size, crc, new=False)
        reader = archive.open_member(paths[0])
        try:
            put = ctx.blobs.put(sha, reader)  # type: ignore[arg-type]
        except BlobDigestMismatch as exc:
            raise ManifestMismatch(
                f"{paths[0]}: content does not match its MANIFEST sha256 ({exc})"
            ) from exc
        finally:
            reader.close()
        for p in paths[1:]:
            _verify_member(archive, p, sha)
        # The reader checked size and CRC-32 against the central directory at EOF.
        return _BlobFacts(reader.member.size, reader.member.crc32, new=put.created)

    workers = min(INGEST_WORKERS, len(work)) or 1
    if workers == 1:
        for sha in work:
            facts[sha] = store_one(sha)
    else:
        # Largest first, so one big member does not start last and run alone.
        work.sort(key=lambda sha: -archive.member_size(in_zip[sha][0]))
        with ThreadPoolExecutor(workers, thread_name_prefix="ingest") as pool:
            futures = {pool.submit(store_one, sha): sha for sha in work}
            try:
                for future in as_completed(futures):
                    facts[futures[future]] = future.result()
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
    if unresolved:
        facts.update(_resolve_missing(ctx, archive, by_sha, unresolved))
    return facts


def _verify_member(archive: CartonArchive, path: str, sha: str) -> None:
    actual, _size = sha256_member(archive, path)
    if actual != sha:
        raise ManifestMismatch(f"{path}: content hashes to {actual}, but MANIFEST says {sha}")


def _resolve_missing(
    ctx: RegistryContext,
    archive: CartonArchive,
    by_sha: dict[str, list[str]],
    unresolved: list[str],
) -> dict[str, _BlobFacts]:
    """Files absent from the zip: already in the store, else fetched through LINKS."""
    facts: dict[str, _BlobFacts] = {}
    links = archive.links or {}
    policy = LinkPolicy(ctx.settings.link_fetch_allow, ctx.settings.link_fetch_timeout)
    client = None
    try:
        for sha in unresolved:
            path = by_sha[sha][0]
            try:
                reader = ChecksumReader(ctx.blobs.open(sha))
                reader.drain()
                facts[sha] = _BlobFacts(reader.size, reader.crc32, new=False)
                continue
            except BlobNotFound:
                pass
            urls = links.get(sha)
            if not urls:
                raise InvalidCarton(
                    f"{path} (sha256 {sha}) is not in the zip, not in the registry, "
                    "and LINKS has no URL for it"
                )
            client = client or make_client(policy)
            failures: list[tuple[str, str]] = []
            for url in urls:
                try:
                    reader = ChecksumReader(
                        IteratorReader(
                            iter_link(client, url, policy, ctx.settings.max_unpacked_bytes)
                        )  # type: ignore[arg-type]
                    )
                    put = ctx.blobs.put(sha, reader)  # type: ignore[arg-type]
                except BlobDigestMismatch:
                    failures.append((url, "content does not hash to the linked sha256"))
                    continue
                except LinkRefused as exc:
                    failures.append((url, str(exc)))
                    continue
                except httpx_errors() as exc:
                    failures.append((url, f"{type(exc).__name__}: {exc}"))
                    continue
                facts[sha] = _BlobFacts(reader.size, reader.crc32, new=put.created)
                break
            else:
                raise LinkFetchFailed(
                    f"{path} (sha256 {sha}) could not be fetched through LINKS: "
                    + describe_failures(failures)
                )
    finally:
        if client is not None:
            client.close()
    return facts


def httpx_errors() -> tuple[type[BaseException], ...]:
    import httpx

    return (httpx.HTTPError, httpx.InvalidURL, OSError)


def _index(
    session: Session,
    manifest: Manifest,
    config: CartonConfig,
    toml_bytes: bytes,
    facts: dict[str, _BlobFacts],
    name: str | None,
    tag: str | None,
) -> tuple[bool, str | None, int | None]:
    """Rows second: blobs, carton, files, model version, tag.

    Returns (created, model name, version).
    """
    insert_ignore(
        session,
        Blob.__table__,  # type: ignore[arg-type]
        [{"sha256": s, "size": f.size, "crc32": f.crc32} for s, f in sorted(facts.items())],
    )
    created = False
    if session.get(Carton, manifest.sha256) is None:
        runner = config.runner
        session.add(
            Carton(
                manifest_sha256=manifest.sha256,
                manifest=manifest.raw,
                carton_toml=toml_bytes.decode("utf-8"),
                spec_version=config.spec_version,
                model_name=config.model_name,
                short_description=config.short_description,
                description=config.model_description,
                runner_name=runner.runner_name if runner else None,
                framework_version=runner.required_framework_version if runner else None,
                runner_compat_version=runner.runner_compat_version if runner else None,
                required_platforms=list(config.required_platforms),
                file_count=len(manifest.entries),
                total_bytes=sum(facts[e.sha256].size for e in manifest.entries),
            )
        )
        session.flush()
        session.execute(
            CartonFile.__table__.insert(),  # type: ignore[attr-defined]
            [
                {
                    "manifest_sha256": manifest.sha256,
                    "path": e.path,
                    "blob_sha256": e.sha256,
                    "size": facts[e.sha256].size,
                }
                for e in manifest.entries
            ],
        )
        created = True
    if name is None:
        # Unnamed push of a carton already versioned under a name (given by ?model= then):
        # the answer names that first version, as a re-push answers the same name and version.
        first = session.execute(
            select(Model.name, Version.version)
            .join(Model, Model.id == Version.model_id)
            .where(Version.manifest_sha256 == manifest.sha256)
            .order_by(Version.id)
            .limit(1)
        ).first()
        return created, (first[0] if first else None), (first[1] if first else None)
    model = _get_or_create_model(session, name)
    version = session.scalar(
        select(Version).where(
            Version.model_id == model.id, Version.manifest_sha256 == manifest.sha256
        )
    )
    if version is None:
        model.last_version += 1
        model.updated_at = utcnow()
        version = Version(
            model_id=model.id, version=model.last_version, manifest_sha256=manifest.sha256
        )
        session.add(version)
        session.flush()
        refresh_model_listing(session, model)
        created = True
    if tag is not None:
        existing = session.get(Tag, (model.id, tag))
        if existing is None:
            session.add(Tag(model_id=model.id, name=tag, version_id=version.id))
        elif existing.version_id != version.id:
            existing.version_id = version.id
            existing.updated_at = utcnow()
    return created, name, version.version


def _get_or_create_model(session: Session, name: str) -> Model:
    insert_ignore(
        session,
        Model.__table__,  # type: ignore[arg-type]
        [{"name": name, "last_version": 0, "created_at": utcnow(), "updated_at": utcnow()}],
    )
    model = session.scalar(select(Model).where(Model.name == name).with_for_update())
    assert model is not None
    return model
