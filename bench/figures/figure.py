"""The figure model: a key, a title, and the function that measures into its section."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench.harness.session import Bench, Scale
from bench.report.table import Section


@dataclass(frozen=True)
class Figure:
    """One section of BENCHMARKS.md.

    ``measure`` fills the section it is given (rows, notes, facts) as it goes, so
    what it measured before a failure still reaches the report. ``title`` may
    depend on the scale (sizes in titles). ``runs_last`` moves a figure to the
    end of the run, where the time budget cuts it first; an ``opt_in`` figure runs
    only when ``--only`` names it.
    """

    key: str
    title: str | Callable[[Scale], str]
    measure: Callable[[Bench, Section], None]
    runs_last: bool = False
    opt_in: bool = False

    def section(self, scale: Scale) -> Section:
        title = self.title if isinstance(self.title, str) else self.title(scale)
        return Section(self.key, title)
