"""Figure 6: peak memory of a fresh registry moving a large carton; the peer's beside it.

The registry runs at serve's default worker count (1 since issue 27; one per core
before), as operators run it, and the target (issue 27: < 200 MiB) is on its whole
process tree: the sum of VmHWM over the serve process, its workers and uvicorn's
multiprocessing helper (one worker serves in the serve process itself).
Beside it: the largest single process, and the peak of the tree's summed VmRSS
and Pss sampled during the transfer (the peaks of a sum of VmHWM need not
coincide; Pss divides shared pages among the processes mapping them). Each
measurement gets a fresh server, so its VmHWM covers only that transfer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from bench.figures.figure import Figure
from bench.harness import MiB
from bench.harness.clients import (
    httpx_download,
    peer_blob_url,
    push_peer,
    push_registry,
    unavailable,
)
from bench.harness.data import equal_layout
from bench.harness.rates import sha256_file_rate
from bench.harness.servers import RssSampler, Server, tree_pids, tree_sum, tree_values
from bench.harness.session import Bench, Scale
from bench.report.table import Row, Section, verdict

T = TypeVar("T")
LIMIT = 200 * MiB


def default_workers() -> int:
    """serve's default worker count."""
    from registry.cli.server_commands import DEFAULT_WORKERS

    return DEFAULT_WORKERS


@dataclass
class TreePeak:
    """A server tree's memory after one transfer, in bytes."""

    hwm_sum: int  # sum of VmHWM over the tree: the target's figure
    hwm_max: int  # the largest single process's VmHWM
    rss_peak: int  # sampled peak of the summed VmRSS
    pss_peak: int  # sampled peak of the summed Pss
    processes: int


def tree_peak(server: Server, transfer: Callable[[Server], T]) -> tuple[T, TreePeak]:
    """(``transfer``'s result, the server tree's memory during it); the server is stopped
    after."""
    try:
        with RssSampler(server.pid) as sampler:
            result = transfer(server)
        sampler.sample()
        hwm = tree_values(server.pid, "VmHWM")
        peak = TreePeak(
            sum(hwm),
            max(hwm, default=0),
            sampler.peak_rss,
            sampler.peak_pss,
            len(tree_pids(server.pid)),
        )
        return result, peak
    finally:
        server.stop()


def settle(server: Server, timeout: float = 20.0) -> int:
    """Wait until the tree's process count and summed VmRSS stop changing (every worker
    imported); that sum, the idle figure."""
    deadline = time.monotonic() + timeout
    last = (-1, -1)
    while time.monotonic() < deadline:
        now = (len(tree_pids(server.pid)), tree_sum(server.pid, "VmRSS") or 0)
        if now[0] == last[0] and abs(now[1] - last[1]) < MiB:
            return now[1]
        last = now
        time.sleep(0.5)
    return last[1]


def peak_rows(what: str, p: TreePeak | None, ref: int | None, why: str | None = None) -> list[Row]:
    """The target row (sum of VmHWM, against the peer's ``ref`` if any) and the rows
    beside it."""
    if p is None:
        return [Row(what, f"not available: {why}")]
    return [
        Row(
            f"{what}: process tree, sum of VmHWM over {p.processes} processes",
            f"{p.hwm_sum / MiB:.0f} MiB",
            "",
            "peer" if ref else "",
            f"{p.hwm_sum / max(ref, 1):.2f}×" if ref else "",
            "",
            "< 200 MiB",
            verdict(p.hwm_sum < LIMIT),
        ),
        Row("same: largest single process (VmHWM)", f"{p.hwm_max / MiB:.0f} MiB"),
        Row(
            "same: sampled peak of the tree's summed VmRSS / summed Pss",
            f"{p.rss_peak / MiB:.0f} / {p.pss_peak / MiB:.0f} MiB",
        ),
    ]


def measure(b: Bench, s: Section) -> None:
    if b.left() < (40 if b.scale.quick else 150):
        s.na("time budget")
        return
    b.stop_servers()
    size = b.scale.mem_size
    workers = default_workers()
    c = b.build(
        f"mem-{b.tag}",
        equal_layout("weights", f"{b.tag}/mem", size, size // (128 * MiB) or 1),
    )
    _, hex_ = sha256_file_rate(c.path)
    try:
        reg = b.start_registry(workers=None, label="registry-mem-push")
        idle = settle(reg)
        idle_n = len(tree_pids(reg.pid))
        (t, resp), push = tree_peak(reg, lambda r: push_registry(b.client, r.url, c.path))

        def pull(r: Server) -> str | None:
            url = f"{r.url}/cartons/{resp['manifest_sha256']}.carton?form=full"
            why = unavailable(b.client, "HEAD", url)
            if why is None:
                httpx_download(b.client, url)
            return why

        reg = b.start_registry(workers=None, label="registry-mem-pull")
        settle(reg)
        why, pulled = tree_peak(reg, pull)
        t_ppush, p_push = tree_peak(
            b.start_peer("peer-mem-push"), lambda p: push_peer(b.client, p.url, c.path, hex_)
        )
        _, p_pull = tree_peak(
            b.start_peer("peer-mem-pull"),
            lambda p: httpx_download(b.client, peer_blob_url(p.url, hex_)),
        )
    finally:
        c.path.unlink(missing_ok=True)
    mib = c.size // MiB
    s.rows.append(
        Row(
            f"registry idle after start, {workers} workers ({idle_n} processes): summed VmRSS",
            f"{idle / MiB:.0f} MiB",
        )
    )
    s.rows += peak_rows(
        f"registry, push of {mib} MiB ({c.size / MiB / t:.0f} MiB/s)", push, p_push.hwm_sum
    )
    pull_peak = pulled if why is None else None
    s.rows += peak_rows(f"registry, full pull of {mib} MiB", pull_peak, p_pull.hwm_sum, why)
    s.rows.append(
        Row(
            f"peer, push of the same bytes ({c.size / MiB / t_ppush:.0f} MiB/s)",
            f"{p_push.hwm_sum / MiB:.0f} MiB",
        )
    )
    s.rows.append(Row("peer, pull of the same blob", f"{p_pull.hwm_sum / MiB:.0f} MiB"))
    s.notes.append(
        f"The registry runs as `carton-registry serve` with no `--workers`: its default, "
        f"{workers} worker(s) (one worker serves in the serve process itself; with more, the "
        "serve process and uvicorn's multiprocessing resource tracker are counted too). One "
        "measurement each (a fresh server per measurement, so VmHWM covers only it). A sum "
        "of RSS counts the interpreter and libraries once per process; the sampled Pss "
        "divides shared pages among them."
    )
    s.facts.update(
        rss_workers=workers,
        rss_idle=idle,
        rss_push=push.hwm_sum,
        rss_push_max=push.hwm_max,
        rss_push_pss=push.pss_peak,
        rss_pull=pull_peak.hwm_sum if pull_peak else None,
        rss_pull_max=pull_peak.hwm_max if pull_peak else None,
        rss_peer_push=p_push.hwm_sum,
        rss_peer_pull=p_pull.hwm_sum,
    )


def _title(scale: Scale) -> str:
    return (
        f"6. Peak memory while moving {scale.mem_size // MiB} MiB: the registry's process "
        "tree at the default worker count, fresh servers"
    )


MEMORY = Figure("memory", _title, measure)
