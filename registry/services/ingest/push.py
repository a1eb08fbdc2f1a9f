"""Push a carton: bytes first (one pass), checks, then rows in one fenced transaction."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from sqlalchemy.exc import IntegrityError

from registry.carton.config import CartonConfig, parse_carton_toml, validate_references
from registry.carton.digests import mismatch_message
from registry.carton.manifest import Manifest
from registry.carton.paths import CARTON_TOML, TENSOR_INDEX
from registry.carton.tensor_data import parse_tensor_index
from registry.carton.validate import MAX_STRING_TENSOR_CHECK, tensor_problems
from registry.errors import (
    ArchiveTooLarge,
    InvalidCarton,
    ManifestMismatch,
    ModelNameRequired,
)
from registry.services.blobs import stored_subset
from registry.services.chunkstore.index import record_files
from registry.services.chunkstore.layout import FileLayout
from registry.services.chunkstore.reader import (
    StoredFile,
    load_files,
    read_file,
    stored_from_layout,
)
from registry.services.chunkstore.writer import PackSession
from registry.services.context import RegistryContext
from registry.services.ingest.index import index_carton
from registry.services.ingest.receive import receive
from registry.services.ingest.resolve import resolve_missing
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
    bytes_stored: int = 0
    created: bool = field(default=False)
    seconds: float = field(default=0.0)

    def as_json(self) -> dict[str, Any]:
        body = asdict(self)
        body.pop("created")
        body.pop("seconds")
        return body


def ingest_file(
    ctx: RegistryContext, path: Path, *, model_name: str | None = None, tag: str | None = None
) -> PushResult:
    """Push the carton at ``path`` (a local file)."""
    with open(path, "rb") as source:
        return ingest_stream(ctx, source, model_name=model_name, tag=tag)


def ingest_stream(
    ctx: RegistryContext,
    source: BinaryIO,
    *,
    model_name: str | None = None,
    tag: str | None = None,
) -> PushResult:
    """Push the carton whose zip bytes ``source`` yields, as they arrive."""
    started = time.monotonic()
    with Lease(ctx.sessions, ctx.settings.lease_timeout) as lease:
        packs = PackSession(ctx, lease)
        try:
            result = _push(ctx, source, packs, lease, model_name, tag)
        except BaseException:
            packs.discard()
            raise
    result.seconds = time.monotonic() - started
    notify(ctx.observers.push, result)
    return result


def _push(
    ctx: RegistryContext,
    source: BinaryIO,
    packs: PackSession,
    lease: Lease,
    model_name: str | None,
    tag: str | None,
) -> PushResult:
    received = receive(ctx, source, packs)
    carton = received.carton
    manifest = carton.manifest
    if manifest.get(CARTON_TOML) is None:
        raise InvalidCarton("MANIFEST has no carton.toml entry")

    # The zip's files must be what MANIFEST says they are.
    written: dict[str, FileLayout] = {}
    for entry in manifest.entries:
        source_path = carton.sources.get(entry.path)
        if source_path is None:
            continue
        layout = received.layouts[source_path]
        if layout.sha256 != entry.sha256:
            raise ManifestMismatch(mismatch_message(entry.path, layout.sha256, entry.sha256))
        written[entry.sha256] = layout

    # Lease every file before looking at the index: GC then keeps what we find.
    hashes = {e.sha256 for e in manifest.entries}
    with ctx.transaction() as session:
        lock_blobs_shared(session)
        lease.add(session, hashes)
    with ctx.sessions() as session:
        known = load_files(session, hashes)
    # A row whose object was lost (found by fsck) is no source: rewrite or resolve it.
    whole = [sha for sha, f in known.items() if not f.chunked]
    lost = set(whole) - stored_subset(ctx, whole)
    paths = {e.sha256: e.path for e in reversed(manifest.entries)}
    missing = {
        sha: paths[sha]
        for sha in hashes
        if sha not in written and (sha not in known or sha in lost)
    }
    written.update(resolve_missing(ctx, packs, missing, carton.links))
    packs.finish()

    files: dict[str, StoredFile] = {
        sha: f for sha, f in known.items() if sha not in lost and sha not in written
    }
    files.update({sha: stored_from_layout(layout) for sha, layout in written.items()})
    captured = {
        path: received.captured[source]
        for path, source in carton.sources.items()
        if source in received.captured
    }
    config, toml_bytes = _check_content(ctx, manifest, files, captured)
    name = _choose_name(config, model_name, tag)
    sizes = {sha: f.size for sha, f in files.items()}

    for attempt in range(3):
        try:
            with ctx.transaction() as session:
                lease.fence(session)
                pack_ids = packs.publish(session)
                new = record_files(
                    session, written.values(), pack_ids, replace=lost & written.keys()
                )
                created, name, version = index_carton(
                    session, manifest, config, toml_bytes, sizes, name, tag
                )
                lease.release(session)
            packs.published()
            ctx.caches.index_changed()
            break
        except IntegrityError:
            # A concurrent push of the same manifest or model won the race: read it again.
            if attempt == 2:
                raise
    added = new | (lost & written.keys())
    bytes_total = sum(sizes[e.sha256] for e in manifest.entries)
    bytes_new = sum(written[sha].size for sha in added)
    bytes_stored = sum(
        written[sha].new_chunk_bytes
        if written[sha].chunked
        else (written[sha].size if sha in packs.created_whole else 0)
        for sha in added
    )
    return PushResult(
        manifest_sha256=manifest.sha256,
        model_name=name,
        version=version,
        files=len(manifest.entries),
        bytes_total=bytes_total,
        bytes_new=bytes_new,
        bytes_deduplicated=bytes_total - bytes_new,
        bytes_stored=bytes_stored,
        created=created,
    )


def _check_content(
    ctx: RegistryContext,
    manifest: Manifest,
    files: dict[str, StoredFile],
    captured: dict[str, bytes],
) -> tuple[CartonConfig, bytes]:
    """carton.toml and tensor_data checked as ``inspect`` checks them.

    Their bytes were kept as they streamed (``captured``), or come from the store.
    """

    def stored(path: str) -> StoredFile:
        entry = manifest.get(path)
        assert entry is not None
        return files[entry.sha256]

    def size_of(path: str) -> int:
        return stored(path).size

    def read(path: str, limit: int = MAX_STRING_TENSOR_CHECK) -> bytes:
        if size_of(path) > limit:
            raise ArchiveTooLarge(f"{path} is {size_of(path)} bytes, over the {limit}-byte limit")
        data = captured.get(path)
        return data if data is not None else read_file(ctx.blobs, stored(path))

    toml_bytes = read(CARTON_TOML, ctx.settings.max_carton_toml_bytes)
    config = parse_carton_toml(toml_bytes)
    entries = parse_tensor_index(read(TENSOR_INDEX)) if TENSOR_INDEX in manifest else []
    names = {e.name for e in entries}
    problems = validate_references(config, names, set(manifest.paths))
    if problems:
        raise InvalidCarton(f"{CARTON_TOML}: " + "; ".join(problems))
    problems = tensor_problems(entries, manifest, size_of, read)
    if problems:
        raise InvalidCarton("; ".join(problems))
    return config, toml_bytes


def _choose_name(config: CartonConfig, model_name: str | None, tag: str | None) -> str | None:
    name = config.model_name or model_name
    if tag is not None:
        validate_tag_name(tag)
        if name is None:
            raise ModelNameRequired(
                "a tag needs a model name: carton.toml has no model_name and no ?model= was given"
            )
    return validate_model_name(name) if name is not None else None
