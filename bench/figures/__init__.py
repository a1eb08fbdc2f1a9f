"""The figures: each measures one group of numbers with its reference (peer or machine limit).

A figure is a ``Figure`` (figure.py): a key, a title and ``measure(bench,
section)``, which appends rows (``report.table.value_row``: the value and its
ratio to the reference), notes, and facts for the analysis. ``FIGURES`` lists
them in report order; to add one, write a module here and list it below (see
bench/README.md). Figures may import ``bench.harness`` and ``bench.report.table``.
"""

from __future__ import annotations

from bench.figures.big import BIG
from bench.figures.chunk_transfer import CHUNK_PULL, CHUNK_PUSH
from bench.figures.chunks import CHUNKS
from bench.figures.cli_push import REPUSH, VARIANT
from bench.figures.figure import Figure
from bench.figures.limits import LIMITS
from bench.figures.lineage import LINEAGE
from bench.figures.listing import LISTING
from bench.figures.load import LOAD
from bench.figures.memory import MEMORY
from bench.figures.namespaces import NAMESPACES
from bench.figures.overhead import OVERHEAD
from bench.figures.profile import PROFILE
from bench.figures.pull import PULL
from bench.figures.push import PUSH
from bench.figures.servers import SERVERS_FIGURE

FIGURES: list[Figure] = [
    LIMITS,
    PUSH,
    PROFILE,
    REPUSH,
    VARIANT,
    PULL,
    CHUNKS,
    CHUNK_PUSH,
    CHUNK_PULL,
    LINEAGE,
    NAMESPACES,
    LOAD,
    OVERHEAD,
    SERVERS_FIGURE,
    MEMORY,
    LISTING,
    BIG,
]


def run_order() -> list[Figure]:
    """Report order, except that ``runs_last`` figures go to the end (stable)."""
    return sorted(FIGURES, key=lambda f: f.runs_last)
