"""Hydrate: turn a slim carton into a full one, fetching LINKS from any host and verifying.

Needs no registry: LINKS URLs may point anywhere. The registry's token is
sent only to URLs on the registry's own origin. With a chunk cache, a LINKS URL
that is a registry's ``/blobs/{sha256}`` costs only the chunks the cache lacks.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

import httpx

from registry.carton.digests import mismatch_message
from registry.carton.errors import CartonFormatError
from registry.carton.manifest import MANIFEST_NAME
from registry.carton.zipread import CartonArchive
from registry.carton.zipwrite import STORED, ZSTD, write_zip
from registry.client.blobfetch import iter_blob
from registry.client.cache import ChunkCache
from registry.client.files import CLIENT_LIMITS, atomic_output
from registry.client.transport import ClientError, Progress, Tally


class _VerifyingReader(io.RawIOBase):
    """Reads a member and checks its sha256 at the end (raises ClientError on mismatch)."""

    def __init__(self, raw: BinaryIO, path: str, sha256: str) -> None:
        super().__init__()
        self._raw, self._path, self._sha = raw, path, sha256
        self._h = hashlib.sha256()
        self._checked = False

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        data = self._raw.read(size if size is not None else -1)
        if data:
            self._h.update(data)
        elif not self._checked:
            self._checked = True
            digest = self._h.hexdigest()
            if digest != self._sha:
                raise ClientError(mismatch_message(self._path, digest, self._sha))
        return data

    def close(self) -> None:
        self._raw.close()
        super().close()


def _same_origin(a: str, b: str) -> bool:
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme, pa.netloc) == (pb.scheme, pb.netloc)


def fetch_verified(
    http: httpx.Client,
    path: str,
    sha256: str,
    urls: list[str],
    dest: BinaryIO,
    *,
    auth_origin: str | None = None,
    token: str | None = None,
    cache: ChunkCache | None = None,
    tally: Tally | None = None,
    progress: Progress | None = None,
) -> str:
    """Write the first URL whose (decoded) bytes hash to ``sha256`` into ``dest``; its URL.

    With a ``cache``, a URL of a registry's ``/blobs/{sha256}`` is read as the chunks
    the cache lacks (``registry.client.blobfetch``).
    """
    failures: list[str] = []
    for url in urls:
        dest.seek(0)
        dest.truncate()
        headers = {}
        if token and auth_origin and _same_origin(url, auth_origin):
            headers["Authorization"] = f"Bearer {token}"
        try:
            for piece in iter_blob(
                http, url, sha256, cache=cache, headers=headers, tally=tally, progress=progress
            ):
                dest.write(piece)
        except httpx.HTTPError as exc:
            failures.append(f"{url}: {type(exc).__name__}: {exc}")
            continue
        except ClientError as exc:
            failures.append(exc.message)
            continue
        dest.flush()
        return url
    raise ClientError(f"{path}: no LINKS URL gave the right bytes: " + "; ".join(failures))


def write_full(
    archive: CartonArchive,
    out: BinaryIO,
    where: str,
    linked: Callable[[str, str], BinaryIO],
    method: int,
) -> None:
    """A full carton of ``archive`` (MANIFEST, then every file, no LINKS) into ``out``.

    Files inside the zip are checked against MANIFEST as they are copied;
    ``linked(path, sha256)`` opens the bytes of the others (its caller verifies them).
    """

    def opener(path: str, sha: str) -> Callable[[], BinaryIO]:
        if path in archive.members:
            name = f"{where}: {path}"
            return lambda: _VerifyingReader(archive.open_member(path), name, sha)  # type: ignore[return-value]
        return lambda: linked(path, sha)

    raw = archive.manifest.raw
    members: list[tuple[str, Callable[[], BinaryIO], int]] = [
        (MANIFEST_NAME, lambda: io.BytesIO(raw), STORED)
    ]
    members += [(e.path, opener(e.path, e.sha256), method) for e in archive.manifest]
    write_zip(out, members)


def hydrate_carton(
    slim: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    token: str | None = None,
    registry_url: str | None = None,
    timeout: float = 300.0,
    cache: ChunkCache | None = None,
    tally: Tally | None = None,
    on_fetch: Callable[[str, str], None] | None = None,
    progress: Progress | None = None,
) -> str:
    """Write a full carton (every file inline, no LINKS) from a slim one; its manifest hash.

    Every LINKS URL of a file is tried in turn until one gives bytes hashing to
    the MANIFEST entry; files inside the zip are verified too. The output
    appears only when complete. Errors name the slim file and the file inside it.
    """
    try:
        archive = CartonArchive.open(slim, CLIENT_LIMITS)
    except CartonFormatError as exc:
        raise ClientError(f"{slim}: {exc.message}") from exc
    out_path = Path(output)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    http_timeout = httpx.Timeout(timeout, connect=10.0)
    try:
        with (
            archive,
            tempfile.TemporaryDirectory(prefix=".hydrate-", dir=out_path.parent) as tmpdir,
            httpx.Client(follow_redirects=True, timeout=http_timeout) as http,
        ):
            links = archive.links or {}
            fetched: dict[str, Path] = {}
            for entry in archive.manifest:
                if entry.path in archive.members or entry.sha256 in fetched:
                    continue
                urls = links.get(entry.sha256)
                where = f"{slim}: {entry.path}"
                if not urls:
                    raise ClientError(f"{where}: not in the zip and LINKS has no URL for it")
                tmp = Path(tmpdir) / entry.sha256
                with tmp.open("w+b") as dest:
                    url = fetch_verified(
                        http,
                        where,
                        entry.sha256,
                        urls,
                        dest,
                        auth_origin=registry_url,
                        token=token,
                        cache=cache,
                        tally=tally,
                        progress=progress,
                    )
                if on_fetch is not None:
                    on_fetch(entry.path, url)
                fetched[entry.sha256] = tmp
            with atomic_output(out_path) as f:
                write_full(archive, f, str(slim), lambda _, sha: fetched[sha].open("rb"), ZSTD)
            return archive.manifest_sha256
    finally:  # a failed or interrupted hydrate leaves the cache within its cap too
        if cache is not None and cache.added:
            cache.trim()
