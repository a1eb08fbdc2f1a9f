"""Local carton files on the client side: how far a reader trusts them, and atomic output."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from registry.carton.limits import ArchiveLimits

# A client-side reader accepts what the server could: limits as wide as its maxima.
CLIENT_LIMITS = ArchiveLimits(max_members=1_000_000, max_unpacked_bytes=1 << 62)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A temp file beside ``path``, renamed over it on success, removed on any failure
    (Ctrl-C included).

    The temp file is private while written (mkstemp: 0600); the result gets the
    permissions any new file would (0666 less the umask).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "w+b") as f:
            yield f
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
