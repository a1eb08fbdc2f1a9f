"""A stored weights file's tensor table, read by ranged reads of its header only.

One read of the first ``HEAD_BYTES`` (``registry.carton.weights``: the length
fields), a second one of the rest of the header, so exactly the header's bytes are
read; reads go through the read path (``stored_blobs``), the
same one that serves ``/blobs/{sha256}``. Tables are kept per file hash: a file's
bytes never change.
"""

from __future__ import annotations

import hashlib
import logging

from registry.carton.weights import (
    HEAD_BYTES,
    HeaderNeed,
    TensorEntry,
    WeightsHeaderError,
    parse_header,
    weights_kind,
)
from registry.errors import RegistryError
from registry.services.caches import LruCache
from registry.services.chunkstore.reader import StoredFile
from registry.services.context import RegistryContext
from registry.services.stored_blobs import read_blob, stored_blob

log = logging.getLogger("registry.weights")

_TABLES: LruCache[tuple[str, str, str], list[TensorEntry]] = LruCache(256)


def tensor_table(
    ctx: RegistryContext, path: str, sha256: str, size: int
) -> list[TensorEntry] | None:
    """The tensors of the weights file at ``path``; None when it is not one (by name) or
    its header cannot be read."""
    kind = weights_kind(path)
    if kind is None:
        return None
    name = path.rsplit("/", 1)[-1]
    key = (sha256, kind, name)
    cached = _TABLES.get(key)
    if cached is not None:
        return cached
    try:
        blob = stored_blob(ctx, sha256)
        head = _read(ctx, blob, 0, min(HEAD_BYTES, size))
        parsed = parse_header(kind, head, size, name)
        if isinstance(parsed, HeaderNeed) and parsed.needed > len(head):
            head += _read(ctx, blob, len(head), parsed.needed)
            parsed = parse_header(kind, head, size, name)
        if isinstance(parsed, HeaderNeed):  # the header's own lengths disagree
            raise WeightsHeaderError("header length changed between reads")
    except (WeightsHeaderError, RegistryError) as exc:
        log.info("no tensor table for %s (%s): %s", path, sha256, exc)
        return None
    _TABLES.put(key, parsed)
    return parsed


def _read(ctx: RegistryContext, blob: StoredFile, start: int, end: int) -> bytes:
    return b"".join(read_blob(ctx, blob, start, end))


def tensor_digest(ctx: RegistryContext, sha256: str, entry: TensorEntry) -> str:
    """sha256 of one tensor's data bytes (``diff --exact``)."""
    digest = hashlib.sha256()
    for piece in read_blob(ctx, stored_blob(ctx, sha256), entry.start, entry.end):
        digest.update(piece)
    return digest.hexdigest()
