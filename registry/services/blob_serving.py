"""How a blob download is answered: a presigned redirect, identity bytes, or compressed bytes.

The HTTP layer negotiates with the client (which content coding it accepts
best, whether it asked for a range) and applies the plan made here; the
choices that depend on settings, the store and the bytes themselves live here:

- with ``REGISTRY_S3_PRESIGN_DOWNLOADS`` and a store that presigns, the client
  is sent to the store, whatever its Range or Accept-Encoding (the object store
  honours Range, and identity is always an acceptable answer);
- else a body is compressed with the accepted coding only when the blob is over
  1 KiB and its first 64 KiB compress below 90 % (zlib level 1 as the judge).

``plan_blob_download`` does every lookup a blob answer needs before its first
byte in one call (one trip to a worker thread for an async caller).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from registry.blobstore.base import BlobStore
from registry.services.chunkstore.reader import StoredFile, find_file, iter_file, read_file
from registry.services.context import RegistryContext

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
    """What to send for one blob.

    ``redirect_url``: send the client there instead. ``coding``: compress the
    body with it (else identity). ``head``: the first bytes, already read to
    judge compressibility; ``iter_bytes`` does not read them again.
    """

    stored: StoredFile
    store: BlobStore = field(repr=False)
    redirect_url: str | None = None
    coding: str | None = None
    head: bytes = b""

    @property
    def sha256(self) -> str:
        return self.stored.sha256

    @property
    def size(self) -> int:
        return self.stored.size

    def iter_bytes(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """The identity bytes ``[start, end)``, in store-sized chunks."""
        stop = self.size if end is None else end
        if start < len(self.head):
            piece = self.head[start:stop]
            yield piece
            start += len(piece)
        if start < stop:
            yield from iter_file(self.store, self.stored, start, stop)


def plan_blob_download(
    ctx: RegistryContext, sha256: str, *, send_body: bool, coding: str | None
) -> BlobDownload:
    """Size, redirect and coding of a blob answer.

    ``send_body`` False (HEAD, or a 304): the size alone (never redirected).
    ``coding``: the content coding the client accepts best, None for identity
    only (also for range requests: ranges are of the identity bytes).
    Raises ``InvalidRequest`` for a malformed digest, ``NotFound`` for an absent blob.
    """
    stored = find_file(ctx, sha256)
    plan = BlobDownload(stored, ctx.blobs)
    if not send_body:
        return plan
    if ctx.settings.s3_presign_downloads and not stored.chunked:
        url = ctx.blobs.presigned_get_url(sha256)
        if url:
            return BlobDownload(stored, ctx.blobs, redirect_url=url)
    if coding is None or stored.size <= COMPRESS_MIN_BYTES:
        return plan
    head = read_file(ctx.blobs, stored, 0, SNIFF_BYTES)
    return BlobDownload(
        stored, ctx.blobs, coding=coding if worth_compressing(head) else None, head=head
    )
