"""Push a carton: bytes first (one pass), checks, then rows in one fenced transaction."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.exc import IntegrityError

from registry.carton.config import CartonConfig, parse_carton_toml, validate_references
from registry.carton.digests import mismatch_message
from registry.carton.manifest import Manifest
from registry.carton.names import model_conflict, names_another_model, split_name
from registry.carton.paths import CARTON_TOML, TENSOR_INDEX
from registry.carton.streams import Readable
from registry.carton.tensor_data import parse_tensor_index
from registry.carton.validate import MAX_STRING_TENSOR_CHECK, tensor_problems
from registry.carton.zipstream import StreamedCarton
from registry.errors import (
    ArchiveTooLarge,
    InvalidCarton,
    InvalidName,
    ManifestMismatch,
    ModelNameRequired,
)
from registry.services.access import require_write
from registry.services.blobs import stored_subset
from registry.services.chunkstore.damage import damaged_files
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
from registry.services.ingest.receive import Received, receive
from registry.services.ingest.repush import answer_from_index, read_ahead
from registry.services.ingest.resolve import resolve_missing
from registry.services.leases import Lease, lock_blobs_shared
from registry.services.lineage import record_after_push
from registry.services.names import validate_model_name, validate_namespace, validate_tag_name
from registry.services.namespaces import require_namespace
from registry.services.observers import notify
from registry.services.private_dedup import (
    carton_stored_for_others,
    restricted,
    usable_blobs,
)


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
    # Written again in place of copies fsck or a read found damaged or lost: not new files
    # (a re-push of a known manifest stays ``bytes_new`` 0), so neither in ``bytes_stored``.
    bytes_healed: int = 0
    created: bool = field(default=False)
    seconds: float = field(default=0.0)
    lineage_seconds: float = field(default=0.0)  # of ``seconds``: recording its lineage

    def as_json(self) -> dict[str, Any]:
        body = asdict(self)
        body.pop("created")
        body.pop("seconds")
        body.pop("lineage_seconds")
        return body


def ingest_file(
    ctx: RegistryContext, path: Path, *, model_name: str | None = None, tag: str | None = None
) -> PushResult:
    """Push the carton at ``path`` (a local file)."""
    with open(path, "rb") as source:
        return ingest_stream(ctx, source, model_name=model_name, tag=tag)


def ingest_stream(
    ctx: RegistryContext,
    source: Readable,
    *,
    model_name: str | None = None,
    tag: str | None = None,
    namespace: str | None = None,
) -> PushResult:
    """Push the carton whose zip bytes ``source`` yields, as they arrive.

    ``namespace`` puts a name without one into it (``?namespace=acme``: ``bert`` is
    pushed as ``acme/bert``); the caller must be allowed to push there, which is
    checked before any byte is read when the namespace is known up front, and again
    once carton.toml has given the name.
    """
    if namespace is not None:
        check_may_push_into(ctx, namespace)
    started = time.monotonic()
    body, source = read_ahead(source)  # a small body whole, for a re-push's reads-only answer
    found = answer_from_index(ctx, body, model_name, tag, namespace) if body else None
    if found is not None:
        result = _repushed(*found)
    else:
        with Lease(ctx.sessions, ctx.settings.lease_timeout) as lease:
            packs = PackSession(ctx, lease)
            try:
                result = _push(ctx, source, packs, lease, model_name, tag, namespace)
            except BaseException:
                packs.discard()
                raise
    lineage_started = time.monotonic()
    record_after_push(ctx, result.manifest_sha256)
    result.lineage_seconds = time.monotonic() - lineage_started
    result.seconds = time.monotonic() - started
    notify(ctx.observers.push, result)
    return result


def _repushed(
    name: str | None, version: int | None, carton: StreamedCarton, files: dict[str, StoredFile]
) -> PushResult:
    """The answer to a re-push found in the index (``repush``): nothing new, nothing stored."""
    entries = carton.manifest.entries
    total = sum(files[e.sha256].size for e in entries)
    return PushResult(
        manifest_sha256=carton.manifest.sha256,
        model_name=name,
        version=version,
        files=len(entries),
        bytes_total=total,
        bytes_new=0,
        bytes_deduplicated=total,
    )


INDEX_ATTEMPTS = 3
"""Indexing transactions a push tries: a concurrent push of the same manifest or model
may win a unique key, and the next attempt reads its rows."""


def _push(
    ctx: RegistryContext,
    source: Readable,
    packs: PackSession,
    lease: Lease,
    model_name: str | None,
    tag: str | None,
    namespace: str | None = None,
) -> PushResult:
    """Bytes first (one pass), then what MANIFEST names but the zip left out, the
    content checks, and the rows in one fenced transaction."""
    received = receive(ctx, source, packs)
    manifest = received.carton.manifest
    if manifest.get(CARTON_TOML) is None:
        raise InvalidCarton("MANIFEST has no carton.toml entry")
    written = _written_files(received)
    known, lost = _known_files(ctx, lease, {e.sha256 for e in manifest.entries})
    hidden, carton_hidden = hidden_files(ctx, known, manifest.sha256)
    paths = {e.sha256: e.path for e in reversed(manifest.entries)}
    missing = {
        sha: path
        for sha, path in paths.items()
        if sha not in written and (sha not in known or sha in lost or sha in hidden)
    }
    # A lost or damaged file is never taken from the store's object: that is what is wrong.
    written.update(resolve_missing(ctx, packs, missing, received.carton.links, hidden | lost))
    packs.finish()

    files = {sha: f for sha, f in known.items() if sha not in lost and sha not in written}
    files.update({sha: stored_from_layout(layout) for sha, layout in written.items()})
    captured = {
        path: received.captured[source]
        for path, source in received.carton.sources.items()
        if source in received.captured
    }
    config, toml_bytes = check_content(ctx, manifest, files, captured)
    name = choose_name(config, model_name, tag, namespace)
    check_may_push(ctx, name)
    sizes = {sha: f.size for sha, f in files.items()}
    replaced = lost & written.keys()
    new, created, name, version = _index(
        ctx, lease, packs, written, replaced, manifest, config, toml_bytes, sizes, name, tag
    )
    # What was stored for others only is new to this caller, as far as it may know.
    shown_new = hidden & written.keys()
    added = new | shown_new  # ``new``: rows inserted; a replaced file kept its row
    bytes_total = sum(sizes[e.sha256] for e in manifest.entries)
    bytes_new = sum(written[sha].size for sha in added)
    bytes_stored = _bytes_stored(written, added - shown_new, packs.created_whole) + sum(
        written[sha].size for sha in shown_new
    )
    bytes_healed = _bytes_stored(written, replaced - shown_new, packs.created_whole)
    return PushResult(
        manifest_sha256=manifest.sha256,
        model_name=name,
        version=version,
        files=len(manifest.entries),
        bytes_total=bytes_total,
        bytes_new=bytes_new,
        bytes_deduplicated=bytes_total - bytes_new,
        bytes_stored=bytes_stored,
        bytes_healed=bytes_healed,
        created=created or carton_hidden,
    )


def _written_files(received: Received) -> dict[str, FileLayout]:
    """The layouts of the files the zip held, each what MANIFEST says it is."""
    carton = received.carton
    written: dict[str, FileLayout] = {}
    for entry in carton.manifest.entries:
        source_path = carton.sources.get(entry.path)
        if source_path is None:
            continue
        layout = received.layouts[source_path]
        if layout.sha256 != entry.sha256:
            raise ManifestMismatch(mismatch_message(entry.path, layout.sha256, entry.sha256))
        written[entry.sha256] = layout
    return written


def _known_files(
    ctx: RegistryContext, lease: Lease, hashes: set[str]
) -> tuple[dict[str, StoredFile], set[str]]:
    """The indexed files among ``hashes``, and those of them whose object was lost, is
    damaged, or whose chunks are (found by fsck or a read): no source, so rewritten (a
    damaged object replaced) or resolved like missing ones.

    Every file is leased before the index is looked at: GC then keeps what is found.
    """
    with ctx.transaction() as session:
        lock_blobs_shared(session)
        lease.add(session, hashes)
    with ctx.sessions() as session:
        known = load_files(session, hashes)
        damaged = damaged_files(session, known)
    whole = [sha for sha, f in known.items() if not f.chunked and sha not in damaged]
    return known, (set(whole) - stored_subset(ctx, whole)) | damaged


def hidden_files(
    ctx: RegistryContext, known: dict[str, StoredFile], manifest_sha256: str
) -> tuple[set[str], bool]:
    """Of the indexed files, those stored for others only (``private_dedup``): not there
    for this caller, which must send them; and whether the carton itself is."""
    with ctx.sessions() as session:
        if not restricted(session):
            return set(), False
        hidden = set(known) - usable_blobs(ctx, session, known)
        return hidden, carton_stored_for_others(session, manifest_sha256)


def _index(
    ctx: RegistryContext,
    lease: Lease,
    packs: PackSession,
    written: dict[str, FileLayout],
    replaced: set[str],
    manifest: Manifest,
    config: CartonConfig,
    toml_bytes: bytes,
    sizes: dict[str, int],
    name: str | None,
    tag: str | None,
) -> tuple[set[str], bool, str | None, int | None]:
    """Rows second, in one transaction fenced by the lease: (files inserted, created,
    model name, version)."""
    for attempt in range(1, INDEX_ATTEMPTS + 1):
        try:
            with ctx.transaction() as session:
                lease.fence(session)
                new = record_files(
                    session, written.values(), packs.pack_ids(session), replace=replaced
                )
                created, name, version = index_carton(
                    session, manifest, config, toml_bytes, sizes, name, tag
                )
                lease.release(session)
            ctx.caches.index_changed()
            return new, created, name, version
        except IntegrityError:
            # A concurrent push of the same manifest or model won the race: read it again.
            if attempt == INDEX_ATTEMPTS:
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def _bytes_stored(written: dict[str, FileLayout], added: set[str], created: set[str]) -> int:
    """What the push added to the store: new chunks of its chunked files, and the whole
    blobs it created."""
    return sum(
        written[sha].new_chunk_bytes
        if written[sha].chunked
        else (written[sha].size if sha in created else 0)
        for sha in added
    )


def check_content(
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

    toml_bytes = read(CARTON_TOML, ctx.archive_limits.max_carton_toml_bytes)
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


def check_may_push_into(ctx: RegistryContext, namespace: str) -> None:
    """The caller may push into ``namespace`` (which must exist and be visible to it)."""
    check_may_push(ctx, f"{validate_namespace(namespace)}/-")


def check_may_push(ctx: RegistryContext, name: str | None) -> None:
    """The caller may push this name (unnamed: into the root namespace)."""
    with ctx.sessions() as session:
        namespace = require_namespace(session, name) if name is not None else ""
        require_write(session, namespace, "push", name or "")


def choose_name(
    config: CartonConfig, model_name: str | None, tag: str | None, namespace: str | None = None
) -> str | None:
    """carton.toml's model_name, else ``?model=``; a ``?model=`` naming another model is a
    400, one naming the same model in a namespace (``acme/bert``) pushes it there."""
    if names_another_model(config.model_name, model_name):
        raise InvalidCarton(model_conflict(config.model_name or "", model_name or ""))
    name = model_name or config.model_name
    if namespace is not None:
        if name is None:
            raise ModelNameRequired(
                "a namespace needs a model name: carton.toml has no model_name and no "
                "?model= was given"
            )
        inside, leaf = split_name(name)
        if inside and inside != namespace:
            raise InvalidName(f"model {name!r} is not in namespace {namespace!r}")
        name = f"{namespace}/{leaf}"
    if tag is not None:
        validate_tag_name(tag)
        if name is None:
            raise ModelNameRequired(
                "a tag needs a model name: carton.toml has no model_name and no ?model= was given"
            )
    return validate_model_name(name) if name is not None else None
