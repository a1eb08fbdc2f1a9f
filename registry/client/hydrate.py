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
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

import httpx

from registry.carton.canonical import ReadRange, full_layout
from registry.carton.digests import mismatch_message
from registry.carton.errors import CartonFormatError
from registry.carton.streams import CHUNK, ByteStream, crc32, pread_range
from registry.carton.zipread import CartonArchive
from registry.client.blobfetch import iter_blob
from registry.client.cache import ChunkCache
from registry.client.files import CLIENT_LIMITS, atomic_output
from registry.client.transport import ClientError, Progress, Tally


class _VerifyingReader(io.RawIOBase):
    """Reads a member and checks its sha256 at the end (raises ClientError on mismatch)."""

    def __init__(self, raw: ByteStream, path: str, sha256: str) -> None:
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


def _file_crc32(path: Path) -> int:
    crc = 0
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            crc = crc32(chunk, crc)
    return crc


def write_full(
    archive: CartonArchive, out: BinaryIO, where: str, linked: Mapping[str, Path]
) -> int:
    """The full carton of ``archive`` into ``out``, in the one byte form the registry's full
    download has (``registry.carton.canonical``); bytes written.

    Files inside the zip are checked against MANIFEST as they are copied; ``linked``
    holds the others (by sha256), already verified, in local files.
    """

    def member(path: str, sha: str) -> ReadRange:
        def read_range(offset: int, length: int) -> Iterator[bytes]:
            reader = _VerifyingReader(archive.open_member(path), f"{where}: {path}", sha)
            left = offset  # the whole file is written, so 0: a skip only for completeness
            while left > 0 and (data := reader.read(min(CHUNK, left))):
                left -= len(data)
            left = length
            while left > 0:
                data = reader.read(min(CHUNK, left))
                if not data:
                    break
                left -= len(data)
                yield data
            if left == 0 and offset + length == archive.member_size(path):
                reader.read(1)  # at the end: the sha256 check

        return read_range

    def local(path: Path) -> ReadRange:
        def read_range(offset: int, length: int) -> Iterator[bytes]:
            with path.open("rb", buffering=0) as f:
                yield from pread_range(f.fileno(), offset, offset + length)

        return read_range

    files: dict[str, tuple[int, int, ReadRange]] = {}
    for e in archive.manifest:
        if e.path in archive.members:
            m = archive.members[e.path]
            if m.is_symlink and m.symlink_target is not None:  # the bytes it resolves to
                m = archive.members[m.symlink_target]
            files[e.path] = (m.size, m.crc32, member(e.path, e.sha256))
        else:
            tmp = linked[e.sha256]
            files[e.path] = (tmp.stat().st_size, _file_crc32(tmp), local(tmp))
    layout = full_layout(archive.manifest, files)
    for chunk in layout.iter_bytes():
        out.write(chunk)
    return layout.size


def hydrate_carton(
    slim: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    token: str | None = None,
    registry_url: str | None = None,
    timeout: float = 300.0,
    cache: ChunkCache | None = None,
    tally: Tally | None = None,
    on_fetch: Callable[[str, str, Tally], None] | None = None,
    progress: Progress | None = None,
    force: bool = True,
) -> str:
    """Write a full carton (every file inline, no LINKS) from a slim one; its manifest hash.

    Every LINKS URL of a file is tried in turn until one gives bytes hashing to
    the MANIFEST entry; files inside the zip are verified too. The output
    appears only when complete. Errors name the slim file and the file inside it.
    ``on_fetch(path, url, got)`` follows each linked file: ``got.moved`` bytes came from
    ``url``, ``got.reused`` from the local chunk cache.
    """
    try:
        archive = CartonArchive.open(slim, CLIENT_LIMITS)
    except CartonFormatError as exc:
        raise ClientError(f"{slim}: {exc.message}") from exc
    out_path = Path(output)
    if not out_path.parent.is_dir():
        archive.close()
        raise FileNotFoundError(f"{out_path.parent}: no such folder (create it first)")
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
                got = Tally()  # this file's bytes: received, and found in the local cache
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
                        tally=got,
                        progress=progress,
                    )
                if tally is not None:
                    tally.add(moved=got.moved, reused=got.reused)
                if on_fetch is not None:
                    on_fetch(entry.path, url, got)
                fetched[entry.sha256] = tmp
            with atomic_output(out_path, force=force) as f:
                write_full(archive, f, str(slim), fetched)
            return archive.manifest_sha256
    finally:  # a failed or interrupted hydrate leaves the cache within its cap too
        if cache is not None and cache.added:
            cache.trim()
