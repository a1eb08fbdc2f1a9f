"""Figure 5b: the ASGI server, chosen by measurement: uvicorn (uvloop, httptools) and Granian.

The same app, one worker each, through ``carton-registry serve --server X``:
`/healthz`, HEAD of a blob and the slim carton under hey, and the full carton with
curl. Runs alternate between the two servers; each ratio compares Granian with
uvicorn in the same run.
"""

from __future__ import annotations

import importlib.util
import shutil

from bench.figures.figure import Figure
from bench.harness import MiB
from bench.harness.clients import curl_download
from bench.harness.load import CONNECTIONS, run_load
from bench.harness.session import Bench
from bench.harness.stats import Sample, med
from bench.report.table import Section, value_row

SERVERS = ("uvicorn", "granian")


def _targets(url: str, manifest: str, blob: str) -> list[tuple[str, str, str]]:
    carton = f"{url}/cartons/{manifest}.carton"
    return [
        ("`GET /healthz`", "GET", f"{url}/healthz"),
        ("`HEAD /blobs/{sha}`", "HEAD", f"{url}/blobs/{blob}"),
        ("`GET /cartons/{sha}.carton` (slim)", "GET", carton),
    ]


def measure(b: Bench, s: Section) -> None:
    if b.pushed is None:
        s.na("no carton pushed in figure 1")
        return
    if importlib.util.find_spec("granian") is None or not shutil.which("hey"):
        s.na("granian or hey not installed")
        return
    if b.reg is not None:
        b.reg.stop()
        b.reg = None
    blob = next(h for p, h in b.pushed.carton.file_sha.items() if "shard-00" in p)
    seconds = max(3, b.scale.wrk_seconds // 2)
    rps: dict[tuple[str, str], list[float]] = {}
    pull: dict[str, list[float]] = {}
    for _ in range(b.scale.runs):
        for server in SERVERS:
            if b.left() < 4 * seconds + 60:
                s.notes.append("stopped early: time budget")
                break
            reg = b.start_registry(label=f"registry-{server}", server=server)
            try:
                for name, method, url in _targets(reg.url, b.pushed.manifest, blob):
                    r = run_load("hey", url, seconds, method, b.work)
                    rps.setdefault((server, name), []).append(r.rps)
                    b.log(f"{server} {method} {name}: {r.rps:.0f} req/s p99 {r.p99:.1f} ms")
                t, n = curl_download(f"{reg.url}/cartons/{b.pushed.manifest}.carton?form=full")
                pull.setdefault(server, []).append(n / MiB / t)
            finally:
                reg.stop()
    for name, _method, _url in _targets("", "", ""):
        ours, theirs = rps.get(("granian", name), []), rps.get(("uvicorn", name), [])
        pairs = list(zip(ours, theirs, strict=False))
        s.rows.append(
            value_row(
                f"Granian: {name} (hey)",
                Sample([g for g, _ in pairs], [g / u for g, u in pairs]),
                "req/s",
                "uvicorn",
            )
        )
        s.rows.append(value_row(f"uvicorn: {name} (hey)", Sample(theirs), "req/s"))
        if pairs:
            s.facts[f"servers_{name}"] = med([g / u for g, u in pairs])
    pairs = list(zip(pull.get("granian", []), pull.get("uvicorn", []), strict=False))
    s.rows.append(
        value_row(
            "Granian: full carton (curl)",
            Sample([g for g, _ in pairs], [g / u for g, u in pairs]),
            "MiB/s",
            "uvicorn",
        )
    )
    s.rows.append(
        value_row("uvicorn: full carton (curl)", Sample(pull.get("uvicorn", [])), "MiB/s")
    )
    if pairs:
        s.facts["servers_full_pull"] = med([g / u for g, u in pairs])
    s.notes.append(
        f"`carton-registry serve --workers 1 --server X`, access log on; hey -c {CONNECTIONS}, "
        f"{seconds} s each; the servers alternate run by run. Neither server can send a "
        "rebuilt carton zero-copy: Granian's `http.response.pathsend` sends one whole file "
        "as the whole body, and a carton interleaves zip headers with its members."
    )


SERVERS_FIGURE = Figure(
    "servers", "5b. ASGI server: uvicorn and Granian (one worker)", measure, runs_last=True
)
