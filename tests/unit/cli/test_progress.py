"""Progress bars fit 80 columns and speak one unit family (issue 26 item 5)."""

from __future__ import annotations

import io
import re

from rich.console import Console

from registry.cli.output import build_progress

GiB = 1 << 30


def rendered(description: str, detail: str | None, width: int = 80) -> list[str]:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=False, color_system=None)
    progress = build_progress(description, (lambda: detail) if detail else None, console)
    task = progress.add_task(description, total=12 * GiB)
    progress.update(task, completed=3 * GiB + 123_456_789)
    console.print(progress.make_tasks_table(progress.tasks))
    return [line for line in out.getvalue().splitlines() if line.strip()]


def test_a_long_transfer_line_fits_80_columns_on_one_line():
    lines = rendered(
        "pull a_rather_long_model_name_for_a_progress_bar-3f2a9c1d4e5b-full.carton",
        "received 3.1 GiB, 8.9 GiB cached from the local chunk cache",
    )
    assert len(lines) == 1, lines
    assert len(lines[0]) <= 80, lines[0]
    assert "…" in lines[0]


def test_sizes_are_binary_units_only():
    [line] = rendered("push m.carton", "sent 3.1 GiB, 0 B already there")
    assert "GiB" in line
    assert not re.search(r"\\d ?(kB|MB|GB)\\b", line), line


def test_a_wide_terminal_shows_the_whole_detail():
    detail = "received 3.1 GiB, 8.9 GiB cached"
    [line] = rendered("pull m.carton", detail, width=120)
    assert detail in line and len(line) <= 120
