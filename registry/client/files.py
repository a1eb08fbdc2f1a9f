"""Local carton files on the client side: how far a reader trusts them, and atomic output."""

from __future__ import annotations

import contextlib
import filecmp
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


class OutputExists(FileExistsError):
    """The output file exists with other bytes, and replacing it was not asked for."""


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], *, force: bool = True) -> Iterator[BinaryIO]:
    """A temp file beside ``path``, renamed over it on success, removed on any failure
    (Ctrl-C included).

    The temp file is private while written (mkstemp: 0600); the result gets the
    permissions any new file would (0666 less the umask). The folder must exist (a
    typo'd one is an error, not a new tree). Unless ``force``, an existing file with
    other bytes is kept (``OutputExists``); one with the same bytes is left as it is.
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise FileNotFoundError(f"{target.parent}: no such folder (create it first)")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "w+b") as f:
            yield f
        os.chmod(tmp, 0o666 & ~_umask())
        if not force and target.exists():
            if not filecmp.cmp(tmp, target, shallow=False):
                raise OutputExists(f"{target} exists and differs; kept it (--force replaces it)")
            os.unlink(tmp)
            return
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
