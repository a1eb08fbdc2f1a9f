"""What a figure fills: rows of measured values beside their reference, notes and facts."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.harness.stats import Sample, med


@dataclass
class Row:
    """One line of a section's table: a measured value, and its ratio to a reference."""

    what: str
    value: str
    spread: str = ""
    ratio_to: str = ""
    ratio: str = ""
    ratio_spread: str = ""
    target: str = ""
    met: str = ""


@dataclass
class Section:
    """One figure's part of the report; ``facts`` are the numbers its analysis line reads."""

    key: str
    title: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unavailable: str | None = None
    extra_md: str = ""
    facts: dict[str, Any] = field(default_factory=dict)

    def na(self, why: str) -> None:
        self.unavailable = why


def verdict(ok: bool) -> str:
    """The "met" cell: a miss stands out in bold."""
    return "yes" if ok else "**no**"


def fmt(x: float | None, digits: int = 1) -> str:
    """A number with about three significant digits (thousands separated), or "n/a"."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.{digits}f}"
    if abs(x) >= 1:
        return f"{x:.{max(digits, 2)}f}"
    return f"{x:.3g}"


def spread(values: list[float], unit: str = "") -> str:
    """The "min – max" cell; empty for a single run."""
    if len(values) < 2:
        return ""
    return f"{fmt(min(values))} – {fmt(max(values))}{unit}"


def value_row(
    what: str,
    s: Sample,
    unit: str,
    ratio_to: str = "",
    target: str = "",
    check: Callable[[float], bool] | None = None,
    check_on: str = "ratio",
) -> Row:
    """Median of the runs (and of the per-run ratios), checked against the target if any."""
    v = med(s.values)
    r = med(s.ratios) if s.ratios else float("nan")
    met = ""
    if check is not None:
        basis = r if check_on == "ratio" else v
        met = "n/a" if math.isnan(basis) else verdict(check(basis))
    return Row(
        what=what,
        value=f"{fmt(v)} {unit}".strip(),
        spread=spread(s.values),
        ratio_to=ratio_to,
        ratio=f"{fmt(r, 2)}×" if s.ratios else "",
        ratio_spread=spread(s.ratios, "×"),
        target=target,
        met=met,
    )


# --------------------------------------------------------------------------- the bench
