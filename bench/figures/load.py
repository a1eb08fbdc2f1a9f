"""Figure 5: slim carton GET and HEAD under load; each tool's own `/healthz` run is the reference.

GET runs under wrk; HEAD under hey, because Debian's wrk 4.1 stalls waiting for
a HEAD response's body. With ``--workers2`` the same set runs again on a
registry with two worker processes.
"""

from __future__ import annotations

import shutil

from bench.figures.figure import Figure
from bench.harness.clients import unavailable
from bench.harness.load import CONNECTIONS, LoadResult, run_load
from bench.harness.session import Bench, Scale
from bench.harness.stats import Sample, med
from bench.report.table import Row, Section, fmt, value_row, verdict

HEALTHZ = "`GET /healthz`"


def _targets(url: str, msha: str, blob_sha: str) -> list[tuple[str, str, str, str]]:
    """(label, tool, method, url); the healthz row of each tool is that tool's reference."""
    return [
        (HEALTHZ, "wrk", "GET", f"{url}/healthz"),
        ("`GET /cartons/{sha}.carton` (slim)", "wrk", "GET", f"{url}/cartons/{msha}.carton"),
        (HEALTHZ, "hey", "GET", f"{url}/healthz"),
        ("`HEAD /cartons/{sha}.carton`", "hey", "HEAD", f"{url}/cartons/{msha}.carton"),
        ("`HEAD /blobs/{sha}` (128 MiB blob)", "hey", "HEAD", f"{url}/blobs/{blob_sha}"),
    ]


def _run_set(b: Bench, s: Section, url: str, runs: int, label: str) -> None:
    """Every target ``runs`` times against the registry at ``url``; rows labelled ``label``."""
    assert b.pushed is not None
    blob_sha = next(h for p, h in b.pushed.carton.file_sha.items() if "shard-00" in p)
    targets = _targets(url, b.pushed.manifest, blob_sha)
    seconds = b.scale.wrk_seconds
    avail = {
        u: None if "healthz" in u else unavailable(b.client, method, u)
        for _name, _tool, method, u in targets
    }
    res: dict[tuple[str, str], list[LoadResult]] = {}
    for _i in range(runs):
        for name, tool, method, u in targets:
            if avail[u] is not None:
                continue
            if b.left() < seconds + 30:
                s.notes.append(f"{label}: stopped early: time budget")
                break
            r = run_load(tool, u, seconds, method, b.work)
            res.setdefault((name, tool), []).append(r)
            b.log(
                f"{label} {tool} {method} {name}: {r.rps:.0f} req/s p50 {r.p50:.1f} ms p99 {r.p99:.1f} ms non2xx {r.non2xx}"
            )
    for name, tool, method, u in targets:
        if avail[u] is not None:
            s.rows.append(Row(f"{label}: {name}", f"not available: {avail[u]}"))
            continue
        rs = res.get((name, tool), [])
        if not rs:
            continue
        is_ref = "healthz" in u
        ref = res.get((HEALTHZ, tool), [])
        rps = Sample()
        for j, r in enumerate(rs):
            base = ref[j].rps if j < len(ref) else float("nan")
            rps.add(r.rps, ratio=None if is_ref else r.rps / base)
        p50 = med([r.p50 for r in rs])
        p99 = med([r.p99 for r in rs])
        bad = sum(r.non2xx for r in rs)
        row = value_row(
            f"{label}: {name} ({tool})",
            rps,
            "req/s",
            "" if is_ref else f"`/healthz` ({tool})",
            "" if is_ref else "≥ 0.3×",
            None if is_ref else (lambda q: q >= 0.3),
        )
        row.value += f"; p50 {fmt(p50)} ms, p99 {fmt(p99)} ms"
        if not is_ref:
            row.target += "; p99 < 20 ms"
            row.met += f"; p99 {verdict(p99 < 20)}"
        if bad:
            row.value += f" ({bad} non-2xx)"
        s.rows.append(row)
        workers = "w2" if "workers" in label else "w1"
        what = "healthz" if is_ref else ("carton" if "cartons" in u else "blob")
        s.facts[f"load_{workers}_{tool}_{method}_{what}"] = {
            "rps": med(rps.values),
            "ratio": med(rps.ratios) if rps.ratios else None,
            "p50": p50,
            "p99": p99,
        }


def measure(b: Bench, s: Section) -> None:
    if b.pushed is None:
        s.na("no carton pushed in figure 1")
        return
    if not shutil.which("wrk") or not shutil.which("hey"):
        s.na("wrk or hey not installed")
        return
    reg, _peer = b.ensure_servers()
    _run_set(b, s, reg.url, b.scale.runs, "default (1 worker)")
    if b.args.workers2 and b.left() > 5 * (b.scale.wrk_seconds + 10) + 60:
        reg.stop()
        b.reg = None
        w2 = b.start_registry(workers=2, label="registry-workers2")
        try:
            _run_set(b, s, w2.url, 1, "`--workers 2`")
        finally:
            w2.stop()
    s.notes.append(
        f"GET under `wrk -t2 -c{CONNECTIONS} --latency`; HEAD under `hey -c {CONNECTIONS} -m HEAD` "
        "because Debian's wrk 4.1 waits for a body after a HEAD response that carries "
        "Content-Length and stalls (0 requests completed, verified against the peer). Each "
        "tool's own `/healthz` run is the reference for its rows. The server is uvicorn's "
        "default: one worker process, asyncio loop, h11 (no httptools/uvloop installed)."
    )


def _title(scale: Scale) -> str:
    return (
        f"5. Slim pull and HEAD under load ({CONNECTIONS} connections, {scale.wrk_seconds} s each)"
    )


LOAD = Figure("load", _title, measure, runs_last=True)
