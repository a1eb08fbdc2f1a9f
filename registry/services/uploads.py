"""Temp files for uploads in ``<data dir>/uploads``, flock-ed while in use.

GC removes old files there but skips any that a process holds a lock on, so
a long push never loses its spooled body (see gc._clean_spool).
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from registry.services.context import RegistryContext


def uploads_dir(ctx: RegistryContext) -> Path:
    """Where request bodies are spooled (created on first use)."""
    directory = Path(ctx.settings.data_dir) / "uploads"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@contextmanager
def upload_file(ctx: RegistryContext, prefix: str = "upload-") -> Iterator[tuple[Path, BinaryIO]]:
    """A new temp file, open for writing and locked until the block ends; then removed."""
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=".carton", dir=uploads_dir(ctx))
    path = Path(name)
    try:
        with os.fdopen(fd, "wb", buffering=0) as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
            yield path, handle
    finally:
        path.unlink(missing_ok=True)
