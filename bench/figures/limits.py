"""Machine limits: sha256 over memory and the disk's write + fsync rate, the ratios' references."""

from __future__ import annotations

from bench.figures.figure import Figure
from bench.harness import MiB
from bench.harness.rates import sha256_mem_rate, write_fsync_rate
from bench.harness.session import Bench
from bench.harness.stats import Sample, med
from bench.report.table import Section, spread, value_row


def measure(b: Bench, s: Section) -> None:
    hs, ws = Sample(), Sample()
    size = b.scale.stored_size
    for _ in range(b.scale.runs):
        hs.add(size / MiB / sha256_mem_rate(size))
        ws.add(size / MiB / write_fsync_rate(b.work, size))
    s.rows.append(value_row("hashlib.sha256, bytes in memory, 1 MiB updates", hs, "MiB/s"))
    s.rows.append(
        value_row(f"write {size // MiB} MiB + fsync into the data dir's disk", ws, "MiB/s")
    )
    s.facts.update(
        sha_mem=med(hs.values),
        disk_fsync=med(ws.values),
        disk_fsync_range=spread(ws.values, " MiB/s"),
    )


LIMITS = Figure("limits", "Machine limits (references for the ratios)", measure)
