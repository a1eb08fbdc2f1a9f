"""Pull: download a carton by manifest hash, write it atomically, verify it.

A full pull with a chunk cache is built here from the slim carton, as
``hydrate`` does, with each linked file made of the chunks the cache holds and
those it lacks (``registry.client.blobfetch``); the result is checked like a
downloaded one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import httpx

from registry.carton.canonical import full_etag
from registry.carton.errors import CartonFormatError
from registry.carton.streams import CHUNK
from registry.carton.zipread import CartonArchive
from registry.client.blobfetch import iter_blob
from registry.client.cache import ChunkCache
from registry.client.files import CLIENT_LIMITS, atomic_output
from registry.client.hydrate import write_full
from registry.client.transport import ClientError, Progress, RegistryClient, Tally


def verify_manifest(
    path: str | os.PathLike[str] | BinaryIO, expected: str, *, full: bool, name: str = ""
) -> None:
    """The MANIFEST hashes to ``expected``; every file is inline (or linked, when slim).

    Errors start with ``name`` (the file being written), else the path.
    """
    where = name or str(path)
    try:
        with CartonArchive.open(path, CLIENT_LIMITS) as archive:
            actual = archive.manifest_sha256
            missing = archive.missing_paths() if full else archive.unresolvable_paths()
    except CartonFormatError as exc:
        raise ClientError(f"{where}: the downloaded carton is not readable: {exc.message}") from exc
    if actual != expected:
        raise ClientError(
            f"{where}: the downloaded MANIFEST hashes to {actual}, expected {expected}"
        )
    if missing:
        raise ClientError(f"{where}: the downloaded carton lacks {', '.join(missing[:5])}")


def _download(
    client: RegistryClient,
    manifest_sha256: str,
    dest: BinaryIO,
    *,
    full: bool,
    on_start: Callable[[int | None], None] | None = None,
    progress: Progress | None = None,
) -> int:
    """``/cartons/{sha}.carton`` into ``dest``; bytes written."""
    written = 0
    response = client.stream_carton(manifest_sha256, full=full)
    try:
        length = response.headers.get("content-length")
        if on_start is not None:
            on_start(int(length) if length and length.isdigit() else None)
        for chunk in response.iter_bytes(CHUNK):
            dest.write(chunk)
            written += len(chunk)
            if progress is not None:
                progress(len(chunk))
    finally:
        response.close()
    dest.flush()
    return written


def pull_carton(
    client: RegistryClient,
    manifest_sha256: str,
    output: str | os.PathLike[str],
    *,
    full: bool = False,
    cache: ChunkCache | None = None,
    tally: Tally | None = None,
    on_start: Callable[[int | None], None] | None = None,
    progress: Progress | None = None,
    force: bool = True,
) -> int:
    """Download ``/cartons/{sha}.carton`` to ``output`` (atomically, verified); bytes written.

    ``full`` with a ``cache``: built locally from the slim carton (module doc). Unless
    ``force``, an existing ``output`` with other bytes is kept (``OutputExists``).
    """
    if full and cache is not None:
        return _build_full(client, manifest_sha256, output, cache, tally, on_start, progress, force)
    with atomic_output(output, force=force) as f:
        written = _download(
            client, manifest_sha256, f, full=full, on_start=on_start, progress=progress
        )
        verify_manifest(f, manifest_sha256, full=full, name=str(output))
    return written


def _full_form(client: RegistryClient, manifest_sha256: str) -> tuple[str | None, int | None]:
    """The ETag and size of the registry's full carton (``HEAD``): what a full carton built
    here must match, byte for byte (``registry.carton.canonical``)."""
    response = client.request("HEAD", f"/cartons/{manifest_sha256}.carton", params={"form": "full"})
    length = response.headers.get("content-length")
    return response.headers.get("etag"), int(length) if length and length.isdigit() else None


def _build_full(
    client: RegistryClient,
    manifest_sha256: str,
    output: str | os.PathLike[str],
    cache: ChunkCache,
    tally: Tally | None,
    on_start: Callable[[int | None], None] | None,
    progress: Progress | None,
    force: bool,
) -> int:
    """The full carton from the slim one and each linked file's chunks (cached or fetched)."""
    output = Path(output)
    if not output.parent.is_dir():
        raise FileNotFoundError(f"{output.parent}: no such folder (create it first)")
    etag, size = _full_form(client, manifest_sha256)
    try:
        with (
            tempfile.TemporaryFile(prefix=".pull-", dir=output.parent) as slim,
            tempfile.TemporaryDirectory(prefix=".pull-", dir=output.parent) as tmpdir,
        ):
            _download(client, manifest_sha256, slim, full=False)
            verify_manifest(slim, manifest_sha256, full=False, name=str(output))
            with CartonArchive.open(slim, CLIENT_LIMITS) as archive:
                if on_start is not None:
                    files = client.get_carton(manifest_sha256)["files"]
                    on_start(sum(f["size"] for f in files if f["path"] not in archive.members))
                fetched: dict[str, Path] = {}
                for e in archive.manifest:
                    if e.path in archive.members or e.sha256 in fetched:
                        continue
                    tmp = Path(tmpdir) / e.sha256
                    with tmp.open("wb") as dest:
                        for piece in _registry_blob(client, e.sha256, cache, tally, progress):
                            dest.write(piece)
                    fetched[e.sha256] = tmp
                with atomic_output(output, force=force) as f:
                    written = write_full(archive, f, str(output), fetched)
                    if (etag, size) != (full_etag(manifest_sha256), written):
                        raise ClientError(
                            f"{output}: the registry's full carton is {size} bytes with ETag "
                            f"{etag}; this client's would be {written} bytes in form "
                            f"{full_etag(manifest_sha256)}: pull it with --no-cache"
                        )
                    verify_manifest(f, manifest_sha256, full=True, name=str(output))
    finally:  # a failed or interrupted pull leaves the cache within its cap too
        if cache.added:
            cache.trim()
    return written


def _registry_blob(
    client: RegistryClient,
    sha256: str,
    cache: ChunkCache,
    tally: Tally | None,
    progress: Progress | None,
) -> Iterator[bytes]:
    url = f"{client.url}/blobs/{sha256}"
    try:
        yield from iter_blob(client.http, url, sha256, cache=cache, tally=tally, progress=progress)
    except httpx.HTTPError as exc:
        raise ClientError(f"{url}: {type(exc).__name__}: {exc}") from exc
