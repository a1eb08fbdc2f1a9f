"""How a blob download is answered: a presigned redirect, identity bytes, or compressed bytes.

The HTTP layer negotiates with the client (which content coding it accepts
best, whether it asked for a range) and applies the plan made here; the
choices that depend on settings, the store and the bytes themselves live here:

- with ``REGISTRY_S3_PRESIGN_DOWNLOADS`` and a store that presigns, the client
  is sent to the store, whatever its Range or Accept-Encoding (the object store
  honours Range, and identity is always an acceptable answer);
- else a body is compressed with the accepted coding only when the blob is over
  1 KiB and its first 64 KiB compress below 90 % (zlib level 1 as the judge).

``plan_blob_download`` makes the plan from the blob's facts (``registry.services.stored_blobs``)
and whether it is worth compressing, which is kept in ``ctx.caches.facts`` like them:
once both are known, planning needs no I/O (``cached_plan``), so a hot blob's GET
starts streaming without a trip to a worker thread.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from registry.services.chunkstore.reader import StoredFile
from registry.services.context import RegistryContext
from registry.services.freshness import current_generation
from registry.services.stored_blobs import read_blob

COMPRESS_MIN_BYTES = 1024
SNIFF_BYTES = 64 * 1024
SNIFF_MAX_RATIO = 0.9


def worth_compressing(sample: bytes) -> bool:
    """A sample over ``COMPRESS_MIN_BYTES`` that zlib shrinks below ``SNIFF_MAX_RATIO``."""
    if len(sample) <= COMPRESS_MIN_BYTES:
        return False
    return len(zlib.compress(sample, 1)) <= SNIFF_MAX_RATIO * len(sample)


@dataclass(frozen=True)
class BlobDownload:
    """What to send for one blob's GET.

    ``redirect_url``: send the client there instead. ``coding``: compress the
    body with it (else identity).
    """

    blob: StoredFile
    redirect_url: str | None = None
    coding: str | None = None


def _may_compress(blob: StoredFile, coding: str | None) -> bool:
    return coding is not None and blob.size > COMPRESS_MIN_BYTES


def cached_plan(ctx: RegistryContext, blob: StoredFile, coding: str | None) -> BlobDownload | None:
    """The plan when it needs no I/O (no presigning, compressibility known), else None."""
    if ctx.settings.s3_presign_downloads and not blob.chunked:
        return None
    if not _may_compress(blob, coding):
        return BlobDownload(blob)
    compressible = ctx.caches.facts.compressible.get(blob.sha256)
    if compressible is None:
        return None
    return BlobDownload(blob, coding=coding if compressible else None)


def plan_blob_download(ctx: RegistryContext, blob: StoredFile, coding: str | None) -> BlobDownload:
    """Redirect and coding of a blob's GET (may read its first bytes or presign a URL).

    ``coding``: the content coding the client accepts best, None for identity only
    (also for range requests: ranges are of the identity bytes).
    """
    if ctx.settings.s3_presign_downloads and not blob.chunked:  # a chunked file is no object
        url = ctx.blobs.presigned_get_url(blob.sha256)
        if url:
            return BlobDownload(blob, redirect_url=url)
    if not _may_compress(blob, coding):
        return BlobDownload(blob)
    facts = ctx.caches.facts
    compressible = facts.compressible.get(blob.sha256)
    if compressible is None:
        generation = current_generation(ctx)
        compressible = worth_compressing(b"".join(read_blob(ctx, blob, 0, SNIFF_BYTES)))
        facts.remember(facts.compressible, blob.sha256, compressible, generation)
    return BlobDownload(blob, coding=coding if compressible else None)
