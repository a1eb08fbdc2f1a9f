"""Push, bytes first: every blob of a carton verified and stored before any row is written.

Members in the zip are hashed while they are written (in a few threads: hashlib and
zlib release the GIL); files absent from the zip are found in the store or fetched
through LINKS (``linkfetch``). What this leaves behind on a failure is unreferenced
blobs, which GC collects after its grace period.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.blobstore import BlobDigestMismatch, BlobNotFound
from registry.carton.streams import ChecksumReader, IteratorReader
from registry.carton.zipread import CartonArchive, sha256_member
from registry.db.queries import in_chunks
from registry.db.tables import Blob
from registry.errors import InvalidCarton, LinkFetchFailed, LinkHostNotAllowed, ManifestMismatch
from registry.services.context import RegistryContext
from registry.services.linkfetch import (
    LinkNotAllowed,
    LinkPolicy,
    LinkRefused,
    describe_failures,
    iter_link,
    make_client,
)

# hashlib and zlib release the GIL: one worker per core hashes and writes in parallel.
INGEST_WORKERS = max(1, min(4, os.cpu_count() or 1))


@dataclass
class BlobFacts:
    """What the rows need of a blob, and whether this push added it to the store."""

    size: int
    crc32: int
    new: bool


def known_blobs(session: Session, by_sha: dict[str, list[str]]) -> dict[str, tuple[int, int]]:
    hashes = list(by_sha)
    known: dict[str, tuple[int, int]] = {}
    for chunk in in_chunks(hashes):
        rows = session.execute(
            select(Blob.sha256, Blob.size, Blob.crc32).where(Blob.sha256.in_(chunk))
        )
        known.update({r.sha256: (r.size, r.crc32) for r in rows})
    return known


def store_blobs(
    ctx: RegistryContext,
    archive: CartonArchive,
    by_sha: dict[str, list[str]],
    present: set[str],
    known: dict[str, tuple[int, int]],
) -> dict[str, BlobFacts]:
    """Verify every member in the zip and store the new ones, a few blobs at a time.

    hashlib and zlib release the GIL, so worker threads hash and write on
    every core; the first failure cancels the rest and rejects the push.
    """
    in_zip = {sha: [p for p in paths if p in present] for sha, paths in by_sha.items()}
    work = [sha for sha in by_sha if in_zip[sha]]
    # Absent from the zip but already indexed (a slim or client-deduplicated push):
    # the row has size and CRC, nothing to read.
    facts: dict[str, BlobFacts] = {
        sha: BlobFacts(*known[sha], new=False) for sha in by_sha if not in_zip[sha] and sha in known
    }
    unresolved = [sha for sha in by_sha if not in_zip[sha] and sha not in known]

    def store_one(sha: str) -> BlobFacts:
        paths = in_zip[sha]
        if sha in known:
            for p in paths:
                _verify_member(archive, p, sha)
            size, crc = known[sha]
            return BlobFacts(size, crc, new=False)
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
        return BlobFacts(reader.member.size, reader.member.crc32, new=put.created)

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
) -> dict[str, BlobFacts]:
    """Files absent from the zip: already in the store, else fetched through LINKS."""
    facts: dict[str, BlobFacts] = {}
    links = archive.links or {}
    policy = LinkPolicy(ctx.settings.link_fetch_allow, ctx.settings.link_fetch_timeout)
    client = None
    try:
        for sha in unresolved:
            path = by_sha[sha][0]
            try:
                reader = ChecksumReader(ctx.blobs.open(sha))
                reader.drain()
                facts[sha] = BlobFacts(reader.size, reader.crc32, new=False)
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
            not_allowed = 0
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
                    not_allowed += isinstance(exc, LinkNotAllowed)
                    continue
                except httpx_errors() as exc:
                    failures.append((url, f"{type(exc).__name__}: {exc}"))
                    continue
                facts[sha] = BlobFacts(reader.size, reader.crc32, new=put.created)
                break
            else:
                error = LinkHostNotAllowed if not_allowed == len(urls) else LinkFetchFailed
                raise error(
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
