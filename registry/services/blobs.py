"""Single-blob verbs: client-side dedup (which blobs are missing) and verified uploads."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO

from sqlalchemy import select

from registry.carton.streams import ChecksumReader
from registry.db.queries import in_chunks, insert_ignore
from registry.db.tables import Blob
from registry.errors import InvalidBody, UploadTooLarge
from registry.services.context import RegistryContext
from registry.services.leases import Lease, lock_blobs_shared
from registry.services.names import require_sha256

MAX_MISSING_QUERY = 100_000
_STAT_THREADS = 8


def stored_subset(ctx: RegistryContext, hashes: Iterable[str]) -> set[str]:
    """The hashes whose objects the blob store really holds (rows can outlive a lost object).

    Checked in a few threads: on S3 each check is a HEAD request.
    """
    wanted = list(hashes)
    if len(wanted) <= 4:
        return {h for h in wanted if ctx.blobs.exists(h)}
    with ThreadPoolExecutor(_STAT_THREADS, thread_name_prefix="blob-stat") as pool:
        return {h for h, ok in zip(wanted, pool.map(ctx.blobs.exists, wanted), strict=True) if ok}


def missing_blobs(ctx: RegistryContext, hashes: Iterable[object]) -> list[str]:
    """Blobs a client must upload: no row, or a row whose object was lost."""
    given = list(hashes)
    if len(given) > MAX_MISSING_QUERY:
        raise InvalidBody(f"at most {MAX_MISSING_QUERY} hashes per request")
    for h in given:
        require_sha256(h, "sha256")
    wanted: list[str] = list(dict.fromkeys(given))  # type: ignore[arg-type]
    present: set[str] = set()
    with ctx.sessions() as session:
        for chunk in in_chunks(wanted):
            present.update(session.scalars(select(Blob.sha256).where(Blob.sha256.in_(chunk))))
    present &= stored_subset(ctx, present)
    return [h for h in wanted if h not in present]


class _Limited:
    def __init__(self, raw: BinaryIO, limit: int) -> None:
        self._raw, self._limit, self._seen = raw, limit, 0

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self._seen += len(data)
        if self._seen > self._limit:
            raise UploadTooLarge(f"blob exceeds REGISTRY_MAX_UPLOAD_BYTES ({self._limit} bytes)")
        return data


def put_blob(ctx: RegistryContext, sha256: str, stream: BinaryIO) -> dict[str, Any]:
    """Store one blob, verified against its name; the row makes it visible to dedup queries.

    Unreferenced, it is collected by GC after the grace period.
    """
    require_sha256(sha256, "sha256")
    reader = ChecksumReader(_Limited(stream, ctx.settings.max_upload_bytes))  # type: ignore[arg-type]
    # Leased like a push: a GC between the write and the row must not take the bytes.
    with Lease(ctx.sessions, ctx.settings.lease_timeout) as lease:
        with ctx.transaction() as session:
            lock_blobs_shared(session)
            lease.add(session, [sha256])
        result = ctx.blobs.put(sha256, reader)  # type: ignore[arg-type]
        with ctx.transaction() as session:
            insert_ignore(
                session,
                Blob.__table__,  # type: ignore[arg-type]
                [{"sha256": sha256, "size": reader.size, "crc32": reader.crc32}],
            )
            lease.release(session)
    return {"sha256": sha256, "size": reader.size, "created": result.created}
