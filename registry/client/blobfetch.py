"""Fetching one file from a registry, taking what the local chunk cache holds.

With a cache, the registry's chunk list of the file (``GET
/api/v1/blobs/{sha256}/chunks``, docs/chunk-transfer.md) says which chunks to
take from the cache and which to fetch: runs of adjacent missing chunks become
ranged ``GET /blobs/{sha256}`` requests of at most ``RANGE_BYTES``; worker threads
read or fetch a few runs ahead of the one being written. Every chunk is checked
against its BLAKE3 name (a damaged cache entry is fetched again) and the file
against its sha256. A file stored whole, a host that
does not serve chunk lists, or no cache: the whole file, as any HTTP client gets it.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx

from registry.carton.digests import is_sha256, mismatch_message
from registry.carton.streams import CHUNK, MiB
from registry.chunking import chunk_hash
from registry.client.cache import ChunkCache
from registry.client.transport import ClientError, Progress, Tally, error_message

FETCH_WORKERS = 4
RANGE_BYTES = 8 * MiB
AHEAD = 2 * FETCH_WORKERS
"""Runs read or fetched ahead of the one being written: what a pull holds in memory."""

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
        name, size = entry.get("hash"), entry.get("size")
        if not (isinstance(name, str) and is_sha256(name) and entry.get("offset") == offset):
            return None
        if not isinstance(size, int) or isinstance(size, bool):
            return None
        if not 0 < size <= RANGE_BYTES:  # what one ranged GET holds in memory
            return None
        chunk = FileChunk(name, offset, size)
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
    """(cached, chunks): the file as runs of at most ``RANGE_BYTES`` of adjacent chunks
    that the cache holds, or that one ranged GET fetches."""
    runs: list[tuple[bool, list[FileChunk]]] = []
    for chunk in chunks:
        cached = cache.has(chunk.name)
        if runs and runs[-1][0] == cached and chunk.end - runs[-1][1][0].offset <= RANGE_BYTES:
            runs[-1][1].append(chunk)
        else:
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


def _load(
    http: httpx.Client,
    blob_url: str,
    cached: bool,
    run: list[FileChunk],
    headers: dict[str, str],
    cache: ChunkCache,
) -> tuple[list[bytes], int]:
    """The bytes of a run's chunks, and how many of them came over the network."""
    if not cached:
        fetched = fetch_range(http, blob_url, run, headers, cache)
        return fetched, sum(len(data) for data in fetched)
    found: list[bytes] = []
    moved = 0
    for chunk in run:
        data = cache.get(chunk.name)
        if data is None:  # damaged, or evicted since: fetch it again
            (data,) = fetch_range(http, blob_url, [chunk], headers, cache)
            moved += len(data)
        found.append(data)
    return found, moved


def iter_chunked(
    http: httpx.Client,
    blob_url: str,
    chunks: list[FileChunk],
    cache: ChunkCache,
    headers: dict[str, str],
    tally: Tally,
) -> Iterator[bytes]:
    """The file's chunks in order, each run read from the cache or fetched by workers a
    few runs ahead of the one being yielded."""
    runs = _runs(chunks, cache)
    pending: deque[Future[tuple[list[bytes], int]]] = deque()
    with ThreadPoolExecutor(FETCH_WORKERS, thread_name_prefix="chunk-fetch") as pool:
        try:
            ahead = iter(runs)
            for _ in runs:
                for cached, run in itertools.islice(ahead, AHEAD - len(pending)):
                    job = (http, blob_url, cached, run, headers, cache)
                    pending.append(pool.submit(_load, *job))
                found, moved = pending.popleft().result()
                tally.add(moved=moved, reused=sum(len(data) for data in found) - moved)
                yield from found
        finally:
            for future in pending:
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
