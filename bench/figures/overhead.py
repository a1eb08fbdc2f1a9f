"""Figure 5a: what one request costs the server's CPU, without sockets, and the middleware's share.

``bench/harness/overhead.py`` runs in its own process on the registry's data dir:
CPU time per request through the whole app, and through the middleware alone
(request id, access log, metrics) around an app that does nothing.
"""

from __future__ import annotations

import json
import subprocess

from bench.figures.figure import Figure
from bench.harness import PY, REPO
from bench.harness.session import Bench
from bench.harness.stats import Sample
from bench.report.table import Section, value_row

BARE = "bare ASGI app"
WRAPPED = "bare ASGI app + the registry's middleware"


def measure(b: Bench, s: Section) -> None:
    if b.pushed is None:
        s.na("no carton pushed in figure 1")
        return
    b.ensure_servers()  # the data dir holds the pushed carton
    blob = next(h for p, h in b.pushed.carton.file_sha.items() if "shard-00" in p)
    data_dir = b.work / "registry-data"
    runs: dict[str, Sample] = {}
    for _ in range(b.scale.runs):
        out = subprocess.run(
            [PY, "-m", "bench.harness.overhead", str(data_dir), b.pushed.manifest, blob],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=REPO,
        )
        if out.returncode != 0:
            s.na(f"overhead probe failed: {out.stderr[-300:]}")
            return
        for name, micros in json.loads(out.stdout).items():
            runs.setdefault(name, Sample()).add(micros)
    bare = runs.pop(BARE)
    wrapped = runs.pop(WRAPPED)
    middleware = Sample([w - b_ for w, b_ in zip(wrapped.values, bare.values, strict=True)])
    healthz = runs["GET /healthz"]
    s.rows.append(
        value_row(
            "middleware alone (request id, JSON access line, metrics)",
            Sample(
                middleware.values,
                [m / h for m, h in zip(middleware.values, healthz.values, strict=True)],
            ),
            "µs CPU / request",
            "`GET /healthz`, whole app",
        )
    )
    for name, sample in runs.items():
        s.rows.append(value_row(f"`{name}`, whole app in-process", sample, "µs CPU / request"))
    s.facts["overhead_middleware_us"] = sorted(middleware.values)[len(middleware.values) // 2]
    s.facts["overhead_healthz_us"] = sorted(healthz.values)[len(healthz.values) // 2]
    s.notes.append(
        "CPU time (`time.process_time()`, all threads, best of 5 batches of 2,000) per request "
        "through the ASGI app in one process, no sockets, with logging set up as `serve` does "
        "(a logging thread writes the JSON access lines). The middleware's cost is the "
        "difference between an app that does nothing, with and without it."
    )


OVERHEAD = Figure("overhead", "5a. Per-request CPU in the server process (no sockets)", measure)
