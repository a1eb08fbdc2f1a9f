"""A folder holding carton.toml, packed into a carton: byte-deterministic, every member Stored.

The same folder (same relative paths, same bytes) always makes the same file: members in
the order the registry's rebuilt cartons use (carton.toml, MANIFEST, then every other
file in MANIFEST order), fixed timestamps, no extra fields. MANIFEST lists every
regular file under the folder; MANIFEST and LINKS in the folder itself are refused
(the packer writes MANIFEST), and so are symlinks and other special files, whose
meaning another machine would not share.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from .errors import CartonFormatError
from .manifest import Manifest, build_manifest
from .paths import CARTON_TOML, LINKS_NAME, MANIFEST_NAME, path_problem
from .streams import CHUNK, ByteStream
from .zipformat import STORED
from .zipwrite import write_zip


def folder_files(folder: Path) -> dict[str, Path]:
    """Every regular file under ``folder`` by its carton path (``/``-separated), sorted."""
    if not (folder / CARTON_TOML).is_file():
        raise CartonFormatError(f"{folder}: no {CARTON_TOML} in the folder")
    files: dict[str, Path] = {}
    for root, dirs, names in os.walk(folder, followlinks=False):
        dirs.sort()
        for name in sorted(names) + [d for d in dirs if (Path(root) / d).is_symlink()]:
            path = Path(root) / name
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink() or not path.is_file():
                raise CartonFormatError(f"{rel}: not a regular file (a symlink or special file)")
            if rel in (MANIFEST_NAME, LINKS_NAME):
                raise CartonFormatError(f"{rel}: the packer writes it; remove it from the folder")
            problem = path_problem(rel)
            if problem is not None:
                raise CartonFormatError(f"{rel}: {problem}")
            files[rel] = path
    return dict(sorted(files.items(), key=lambda item: item[0].encode("utf-8")))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def pack_folder(folder: str | os.PathLike[str], out: BinaryIO) -> Manifest:
    """Write the carton of ``folder`` to ``out`` (streamed: constant memory); its MANIFEST."""
    files = folder_files(Path(folder))
    manifest = build_manifest((rel, _sha256(path)) for rel, path in files.items())
    raw = manifest.raw

    def opener(path: Path) -> Callable[[], ByteStream]:
        return lambda: path.open("rb")

    members: list[tuple[str, Callable[[], ByteStream], int]] = [
        (CARTON_TOML, opener(files[CARTON_TOML]), STORED),
        (MANIFEST_NAME, lambda: io.BytesIO(raw), STORED),
    ]
    members += [
        (entry.path, opener(files[entry.path]), STORED)
        for entry in manifest
        if entry.path != CARTON_TOML
    ]
    write_zip(out, members)
    return manifest
