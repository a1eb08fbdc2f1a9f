"""What the command line prints: messages on stderr, tables, sizes, progress bars, JSON.

Results go to stdout (the last line is what a script wants, e.g. a manifest
hash); everything addressed to the person at the terminal goes to stderr.
Describing verbs print aligned tables for people and take ``--json`` for
scripts.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from registry.humanize import human_bytes

__all__ = [
    "HelpFormatter",
    "Refused",
    "err",
    "fail",
    "human_bytes",
    "print_json",
    "print_table",
    "transfer_progress",
]


class HelpFormatter(argparse.HelpFormatter):
    """Wraps each line of a description or epilog, but keeps indented lines (examples) as
    written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines = []
        for line in text.splitlines():
            if not line or line.startswith("  "):
                lines.append(indent + line)
            else:
                lines.append(super()._fill_text(line, width, indent))
        return "\n".join(lines)


class Refused(Exception):
    """A command will not run as set up (exit status 2): the message says why, in one line."""


def err(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def fail(message: str, code: int = 1) -> int:
    """Report ``error: message`` on stderr; the exit status to return."""
    err(f"error: {message}")
    return code


def print_json(value: Any, *, indent: int | None = 2, ensure_ascii: bool = True) -> None:
    print(json.dumps(value, indent=indent, ensure_ascii=ensure_ascii))


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], *, right: Sequence[str] = ()
) -> None:
    """Aligned columns, two spaces apart, for people (``--json`` is for scripts).

    Columns named in ``right`` (numbers, sizes) are right-aligned; the last column is
    never padded, so long descriptions do not drag trailing spaces.
    """
    cells = [[str(h) for h in headers]] + [["" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        parts = [
            value.rjust(width) if headers[i] in right else value.ljust(width)
            for i, (value, width) in enumerate(zip(row, widths, strict=True))
        ]
        parts[-1] = row[-1] if headers[-1] not in right else parts[-1]
        print("  ".join(parts).rstrip())


class _NoBar:
    def advance(self, n: int) -> None:
        pass

    def set_total(self, n: int | None) -> None:
        pass


# Widths on one 80-column line: label 20, bar 12, "123 MiB/1.50 GiB" 17, "12.3 MiB/s" 10,
# time left 7, five gaps: 71; what detail there is gets the rest (more on a wider terminal).
DESCRIPTION_WIDTH = 20
BAR_WIDTH = 12


def build_progress(description: str, detail: Callable[[], str] | None, console: Any) -> Any:
    """The rich ``Progress`` of a transfer, on one line of at most the console's width (80
    columns fit): a short label, a short bar, bytes done/total and speed in the same binary
    units (KiB, MiB, GiB) as every other size the CLI prints, the time left; ``detail``
    (e.g. bytes sent vs. already known) only where it still fits."""
    from rich.progress import BarColumn, Progress, ProgressColumn, Task, TimeRemainingColumn
    from rich.table import Column
    from rich.text import Text

    class Label(ProgressColumn):
        def render(self, task: Task) -> Text:
            return Text(task.description, no_wrap=True, overflow="ellipsis")

    class Done(ProgressColumn):
        def render(self, task: Task) -> Text:
            done = human_bytes(int(task.completed))
            total = "?" if task.total is None else human_bytes(int(task.total))
            return Text(f"{done}/{total}", style="progress.download")

    class Speed(ProgressColumn):
        def render(self, task: Task) -> Text:
            speed = task.finished_speed or task.speed
            return Text("" if speed is None else f"{human_bytes(int(speed))}/s")

    class Detail(ProgressColumn):
        def render(self, task: Task) -> Text:
            text = detail() if detail is not None else ""
            return Text(text, style="progress.download", no_wrap=True, overflow="ellipsis")

    def fixed(width: int) -> Column:
        return Column(width=width, no_wrap=True, overflow="ellipsis")

    widths = DESCRIPTION_WIDTH + BAR_WIDTH + 17 + 10 + 7 + 5  # five one-space gaps
    tail = fixed(max(1, console.width - widths - 1))  # the rest of the line
    return Progress(
        Label(table_column=fixed(DESCRIPTION_WIDTH)),
        BarColumn(bar_width=BAR_WIDTH, table_column=fixed(BAR_WIDTH)),
        Done(table_column=fixed(17)),
        Speed(table_column=fixed(10)),
        TimeRemainingColumn(table_column=fixed(7)),
        *([Detail(table_column=tail)] if detail is not None else []),
        console=console,
        refresh_per_second=4,
        transient=False,
        expand=False,
    )


@contextmanager
def transfer_progress(
    description: str, total: int | None = None, detail: Callable[[], str] | None = None
) -> Iterator[Any]:
    """A rich progress bar on stderr (hidden when stderr is not a terminal), one line wide.

    Yields an object with ``advance(n)`` and ``set_total(n)``. ``detail`` is shown
    after the bar, read again at every refresh (e.g. bytes sent vs. already known).
    """
    if not sys.stderr.isatty():  # nothing to draw: not even rich is loaded (a script's
        yield _NoBar()  # re-push is mostly start-up time)
        return
    from rich.console import Console

    progress = build_progress(description, detail, Console(stderr=True))

    class Bar:
        def __init__(self) -> None:
            self.task = progress.add_task(description, total=total)

        def advance(self, n: int) -> None:
            progress.advance(self.task, n)

        def set_total(self, n: int | None) -> None:
            progress.update(self.task, total=n)

    with progress:
        yield Bar()
