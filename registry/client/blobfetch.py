"""Fetching one file from a registry, taking what the local chunk cache holds.

With a cache, the registry's chunk list of the file (``GET
/api/v1/blobs/{sha256}/chunks``, docs/chunk-transfer.md) says which chunks to
take from the cache and which to fetch: runs of adjacent missing chunks become
ranged ``GET /blobs/{sha256}`` requests of at most ``RANGE_BYTES``, a few in
flight. Every chunk is checked against its BLAKE3 name (a damaged cache entry is
fetched again) and the file against its sha256. A file stored whole, a host that
does not serve chunk lists, or no cache: the whole file, as any HTTP client gets it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx

from registry.carton.digests import is_sha256, mismatch_message
from registry.carton.streams import CHUNK, MiB
from registry.client.cache import ChunkCache
from registry.client.transport import ClientError, Progress, Tally, error_message

FETCH_WORKERS = 4
RANGE_BYTES = 8 * MiB
AHEAD = 2 * FETCH_WORKERS
"""Ranges fetched ahead of the one being written: what a pull holds in memory."""

_BLOB_URL = re.compile(r"^(?P<base>.*)/blobs/(?P<sha>[0-9a-f]{64})$")


@dataclass(frozen=True)
class FileChunk:
    name: str
    offset: int
    size: int

    @property
    def end(self) -> int:
        return self.offset + self.size


def chunks_url(blob_url: str) -> str | None:
    """Where a registry lists the chunks of the file at ``blob_url`` (``…/blobs/{sha256}``)."""
    match = _BLOB_URL.match(blob_url)
    return f"{match['base']}/api/v1/blobs/{match['sha']}/chunks" if match else None


def _plan(body: Any, sha256: str) -> list[FileChunk] | None:
    """The chunks of a well-formed, chunked reconstruction answer, else None."""
    if not isinstance(body, dict) or body.get("sha256") != sha256 or not body.get("chunked"):
        return None
    chunks: list[FileChunk] = []
    offset = 0
    for entry in body.get("chunks") or []:
        if not isinstance(entry, dict):
            return None
        chunk = FileChunk(entry.get("hash"), entry.get("offset"), entry.get("size"))
        sized = isinstance(chunk.size, int) and not isinstance(chunk.size, bool)
        if not (is_sha256(chunk.name) and chunk.offset == offset and sized and chunk.size > 0):
            return None
        chunks.append(chunk)
        offset = chunk.end
    return chunks if chunks and offset == body.get("size") else None


def chunk_plan(
    http: httpx.Client, blob_url: str, sha256: str, headers: dict[str, str]
) -> list[FileChunk] | None:
    """The file's chunks, in order; None when it is stored whole or the host lists none."""
    url = chunks_url(blob_url)
    if url is None:
        return None
    try:
        response = http.get(url, headers=headers)
        body = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    return _plan(body, sha256)


def _runs(chunks: list[FileChunk], cache: ChunkCache) -> list[tuple[bool, list[FileChunk]]]:
    """(cached, chunks): the file as runs of cached chunks and of fetchable ranges."""
    runs: list[tuple[bool, list[FileChunk]]] = []
    for chunk in chunks:
        cached = cache.has(chunk.name)
        if runs and runs[-1][0] == cached:
            run = runs[-1][1]
            if cached or chunk.end - run[0].offset <= RANGE_BYTES:
                run.append(chunk)
                continue
        runs.append((cached, [chunk]))
    return runs


def fetch_range(
    http: httpx.Client,
    blob_url: str,
    chunks: list[FileChunk],
    headers: dict[str, str],
    cache: ChunkCache,
) -> list[bytes]:
    """Adjacent chunks in one ranged GET, each checked against its name and cached."""
    first, last = chunks[0].offset, chunks[-1].end - 1
    response = http.get(
        blob_url,
        headers={**headers, "Range": f"bytes={first}-{last}", "Accept-Encoding": "identity"},
    )
    if response.status_code != 206:
        raise ClientError(
            f"{blob_url}: bytes {first}-{last}: HTTP {response.status_code} "
            f"{error_message(response)} (expected 206 Partial Content)"
        )
    body = response.content
    if len(body) != last - first + 1:
        raise ClientError(f"{blob_url}: bytes {first}-{last}: got {len(body)} bytes")
    from registry.blobstore.chunking import chunk_hash

    found: list[bytes] = []
    with memoryview(body) as view:
        for chunk in chunks:
            data = bytes(view[chunk.offset - first : chunk.end - first])
            actual = chunk_hash(data)
            if actual != chunk.name:
                raise ClientError(
                    f"{blob_url}: the chunk at offset {chunk.offset} hashes to {actual}, "
                    f"not {chunk.name}"
                )
            cache.put(chunk.name, data)
            found.append(data)
    return found


def iter_chunked(
    http: httpx.Client,
    blob_url: str,
    chunks: list[FileChunk],
    cache: ChunkCache,
    headers: dict[str, str],
    tally: Tally,
) -> Iterator[bytes]:
    """The file's chunks in order: from the cache, or fetched a few ranges ahead."""
    runs = _runs(chunks, cache)
    to_fetch = [i for i, (cached, _) in enumerate(runs) if not cached]
    pending: dict[int, Future[list[bytes]]] = {}
    with ThreadPoolExecutor(FETCH_WORKERS, thread_name_prefix="chunk-fetch") as pool:
        try:
            for i, (cached, run) in enumerate(runs):
                while to_fetch and len(pending) < AHEAD:
                    j = to_fetch.pop(0)
                    pending[j] = pool.submit(
                        fetch_range, http, blob_url, runs[j][1], headers, cache
                    )
                if not cached:
                    fetched = pending.pop(i).result()
                    tally.add(moved=sum(len(data) for data in fetched))
                    yield from fetched
                    continue
                for chunk in run:
                    data = cache.get(chunk.name)
                    if data is None:  # damaged, or evicted since: fetch it again
                        (data,) = fetch_range(http, blob_url, [chunk], headers, cache)
                        tally.add(moved=len(data))
                    else:
                        tally.add(reused=len(data))
                    yield data
        finally:
            for future in pending.values():
                future.cancel()


def iter_whole(http: httpx.Client, url: str, headers: dict[str, str]) -> Iterator[bytes]:
    """The bytes of ``url`` as served (decoded); ClientError on an HTTP error status."""
    with http.stream("GET", url, headers=headers) as response:
        if response.status_code >= 400:
            response.read()
            raise ClientError(f"{url}: HTTP {response.status_code} {error_message(response)}")
        yield from response.iter_bytes(CHUNK)


def iter_blob(
    http: httpx.Client,
    blob_url: str,
    sha256: str,
    *,
    cache: ChunkCache | None = None,
    headers: dict[str, str] | None = None,
    tally: Tally | None = None,
    progress: Progress | None = None,
) -> Iterator[bytes]:
    """The bytes of the file at ``blob_url``; at the end, ClientError unless they hash to
    ``sha256``. Transport failures are raised as httpx errors."""
    headers = headers or {}
    tally = tally if tally is not None else Tally()
    chunks = chunk_plan(http, blob_url, sha256, headers) if cache is not None else None
    if chunks is not None and cache is not None:
        pieces = iter_chunked(http, blob_url, chunks, cache, headers, tally)
    else:
        pieces = iter_whole(http, blob_url, headers)
    h = hashlib.sha256()
    for piece in pieces:
        h.update(piece)
        if chunks is None:
            tally.add(moved=len(piece))
        if progress is not None:
            progress(len(piece))
        yield piece
    digest = h.hexdigest()
    if digest != sha256:
        raise ClientError(mismatch_message(blob_url, digest, sha256))
