"""Pull: download a carton by manifest hash, write it atomically, verify it."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import BinaryIO

from registry.carton.errors import CartonFormatError
from registry.carton.streams import CHUNK
from registry.carton.zipread import CartonArchive
from registry.client.files import CLIENT_LIMITS, atomic_output
from registry.client.transport import ClientError, Progress, RegistryClient


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


def pull_carton(
    client: RegistryClient,
    manifest_sha256: str,
    output: str | os.PathLike[str],
    *,
    full: bool = False,
    on_start: Callable[[int | None], None] | None = None,
    progress: Progress | None = None,
) -> int:
    """Download ``/cartons/{sha}.carton`` to ``output`` (atomically, verified); bytes written."""
    written = 0
    with atomic_output(output) as f:
        response = client.stream_carton(manifest_sha256, full=full)
        try:
            length = response.headers.get("content-length")
            if on_start is not None:
                on_start(int(length) if length and length.isdigit() else None)
            for chunk in response.iter_bytes(CHUNK):
                f.write(chunk)
                written += len(chunk)
                if progress is not None:
                    progress(len(chunk))
        finally:
            response.close()
        f.flush()
        verify_manifest(f, manifest_sha256, full=full, name=str(output))
    return written
