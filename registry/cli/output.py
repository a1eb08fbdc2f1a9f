"""What the command line prints: messages on stderr, sizes, progress bars, JSON on stdout.

Results go to stdout (the last line is what a script wants, e.g. a manifest
hash); everything addressed to the person at the terminal goes to stderr.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def err(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def fail(message: str, code: int = 1) -> int:
    """Report ``error: message`` on stderr; the exit status to return."""
    err(f"error: {message}")
    return code


def print_json(value: Any, *, indent: int | None = 2, ensure_ascii: bool = True) -> None:
    print(json.dumps(value, indent=indent, ensure_ascii=ensure_ascii))


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


@contextmanager
def transfer_progress(description: str, total: int | None = None) -> Iterator[Any]:
    """A rich progress bar on stderr (hidden when stderr is not a terminal).

    Yields an object with ``advance(n)`` and ``set_total(n)``.
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    enabled = sys.stderr.isatty()
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=not enabled,
        transient=False,
    )

    class Bar:
        def __init__(self) -> None:
            self.task = progress.add_task(description, total=total)

        def advance(self, n: int) -> None:
            progress.advance(self.task, n)

        def set_total(self, n: int | None) -> None:
            progress.update(self.task, total=n)

    with progress:
        yield Bar()
