"""A re-push answered from the index: a small zip whose carton is already indexed, under the
name and version it would get again, with every file stored and sound.

The regular push writes four times even when nothing changes (the lease row, the lease of
the zip's own files and of every file the carton names, the indexing transaction that finds
everything in place and drops the lease): 7 ms of a re-push's 10 ms in process on this
host, and on a busy disk each write can wait tens of milliseconds more. Here the same
checks run on reads alone: the zip's rules and its members against MANIFEST, carton.toml
and tensor_data, the files stored (none lost, damaged or held for others only), the model
name, the caller's right to push it, and the version it already has. Anything else (a tag,
a new name, a file to write or heal, a zip that breaks a rule) goes the regular way, with
the same bytes, which answers as it always did.
"""

from __future__ import annotations

import hashlib
import io

from registry.carton.errors import CartonFormatError
from registry.carton.paths import CARTON_TOML, LINKS_NAME, MANIFEST_NAME
from registry.carton.streams import Readable, read_full
from registry.carton.zipstream import StreamedCarton, ZipStream, check_carton
from registry.services.blobs import stored_subset
from registry.services.chunkstore.damage import damaged_files
from registry.services.chunkstore.reader import StoredFile, load_files
from registry.services.context import RegistryContext
from registry.services.ingest.index import indexed_version

FAST_MAX_BYTES = 1024 * 1024
"""Bodies up to this size are read whole first: a slim zip (carton.toml, tensor index,
MANIFEST, LINKS) is a few KiB."""


class Prefixed:
    """``head``, then the rest of ``source``: the bytes read ahead, given back in order."""

    def __init__(self, head: bytes, source: Readable) -> None:
        self._head = io.BytesIO(head)
        self._source = source

    def read(self, size: int = -1, /) -> bytes:
        data = self._head.read(size)
        if size < 0:
            return data + self._source.read()
        if data:
            return data  # a short read; the caller asks again
        return self._source.read(size)


def read_ahead(source: Readable) -> tuple[bytes | None, Readable]:
    """(the whole body, if it is at most ``FAST_MAX_BYTES``; a reader of the same bytes)."""
    head = read_full(source, FAST_MAX_BYTES + 1)
    if len(head) <= FAST_MAX_BYTES:
        return head, io.BytesIO(head)
    return None, Prefixed(head, source)


def _unpacked(ctx: RegistryContext, body: bytes) -> tuple[StreamedCarton, dict[str, bytes]]:
    """The zip as the regular push reads it (same limits and checks), with each MANIFEST
    file's bytes that it holds, checked against MANIFEST; CartonFormatError otherwise."""
    stream = ZipStream(io.BytesIO(body), ctx.archive_limits)
    held: dict[str, bytes] = {}
    for member in stream:
        if member.is_dir or member.path in (MANIFEST_NAME, LINKS_NAME):
            continue
        held[member.path] = member.read()
    carton = check_carton(stream.entries, stream.finish(), ctx.archive_limits)
    by_path = {path: held[source] for path, source in carton.sources.items() if source in held}
    for entry in carton.manifest.entries:
        data = by_path.get(entry.path)
        if data is not None and hashlib.sha256(data).hexdigest() != entry.sha256:
            raise CartonFormatError(f"{entry.path} does not match MANIFEST")
    return carton, by_path


def answer_from_index(
    ctx: RegistryContext,
    body: bytes,
    model_name: str | None,
    tag: str | None,
    namespace: str | None,
) -> tuple[str | None, int | None, StreamedCarton, dict[str, StoredFile]] | None:
    """(model name, version, the carton, its stored files) when ``body`` re-pushes an indexed
    carton that needs no write; else None: the regular push decides, and reports any error
    (a refusal included) exactly as it would have."""
    if tag is not None:
        return None  # a tag may move: the indexing transaction's job
    try:
        return _reads_only(ctx, body, model_name, namespace)
    except Exception:  # a bad zip, a refusal, a lost row: the regular push says why, as before
        return None


def _reads_only(
    ctx: RegistryContext, body: bytes, model_name: str | None, namespace: str | None
) -> tuple[str | None, int | None, StreamedCarton, dict[str, StoredFile]] | None:
    from registry.services.ingest import push  # its checks, shared; it imports this module

    carton, held = _unpacked(ctx, body)
    manifest = carton.manifest
    if manifest.get(CARTON_TOML) is None:
        return None
    hashes = {e.sha256 for e in manifest.entries}
    with ctx.sessions() as session:
        known = load_files(session, hashes)
        if known.keys() != hashes or damaged_files(session, known):
            return None
    whole = [sha for sha, f in known.items() if not f.chunked]
    if len(stored_subset(ctx, whole)) != len(whole):
        return None  # a lost object: rewritten or resolved by the regular push
    hidden, carton_hidden = push.hidden_files(ctx, known, manifest.sha256)
    if hidden or carton_hidden:
        return None
    config, _ = push.check_content(ctx, manifest, known, held)
    name = push.choose_name(config, model_name, None, namespace)
    push.check_may_push(ctx, name)
    with ctx.sessions() as session:
        found = indexed_version(session, manifest.sha256, name)
    if found is None:
        return None
    return found[0], found[1], carton, known
