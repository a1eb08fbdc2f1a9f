"""Median of N: every figure is run N times and reported as its median, min – max beside it."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field


def med(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


@dataclass
class Sample:
    """Per-run values of one measurement (and, where it has one, its per-run ratio)."""

    values: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)

    def add(self, value: float, ratio: float | None = None) -> None:
        self.values.append(value)
        if ratio is not None:
            self.ratios.append(ratio)
