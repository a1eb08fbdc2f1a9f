"""Figure 5: the loader's small requests under load: slim GET, HEAD of a carton and of a blob.

References, measured in the same run with the same client: each tool's own
`/healthz` run on the registry, and the peer's `HEAD /v2/<name>/blobs/<digest>`
(hey). GET runs under wrk and hey; HEAD under hey only, because Debian's wrk 4.1
stalls waiting for a HEAD response's body. With ``--workers2`` the same set runs
again on `serve --workers 2`, and each figure's scaling over one worker is a row.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass

from bench.figures.figure import Figure
from bench.harness.clients import peer_blob_url, push_peer, unavailable
from bench.harness.load import CONNECTIONS, LoadResult, run_load
from bench.harness.session import Bench, Scale
from bench.harness.stats import Sample, med
from bench.report.table import Row, Section, fmt, value_row, verdict

HEALTHZ = "`GET /healthz`"
PEER_HEAD = "peer `HEAD /v2/<name>/blobs/<digest>`"
HEALTHZ_TARGET = 0.5
PEER_TARGET = 1.5
SCALING_TARGET = 1.6
P99_TARGET_MS = 20


@dataclass(frozen=True)
class Target:
    """One load run's request; ``base`` None means the registry under test."""

    label: str
    tool: str
    method: str
    path: str
    what: str  # healthz, carton, blob or peer: the facts' key
    base: str | None = None


def _targets(msha: str, blob_sha: str) -> list[Target]:
    carton = f"/cartons/{msha}.carton"
    slim, blob = "`GET /cartons/{sha}.carton` (slim)", "`HEAD /blobs/{sha}` (128 MiB blob)"
    return [
        Target(HEALTHZ, "wrk", "GET", "/healthz", "healthz"),
        Target(slim, "wrk", "GET", carton, "carton"),
        Target(HEALTHZ, "hey", "GET", "/healthz", "healthz"),
        Target(slim, "hey", "GET", carton, "carton"),
        Target("`HEAD /cartons/{sha}.carton`", "hey", "HEAD", carton, "carton"),
        Target(blob, "hey", "HEAD", f"/blobs/{blob_sha}", "blob"),
    ]


def _peer_head(b: Bench, peer_url: str) -> Target:
    """HEAD of a 1 MiB blob pushed to the peer (HEAD does not read it)."""
    path = b.work / "peer-head-blob.bin"
    path.write_bytes(os.urandom(1 << 20))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    push_peer(b.client, peer_url, path, digest)
    path.unlink()
    blob_url = peer_blob_url(peer_url, digest)
    return Target(PEER_HEAD, "hey", "HEAD", blob_url.removeprefix(peer_url), "peer", peer_url)


def _measure_set(
    b: Bench, s: Section, targets: list[Target], registry: str, runs: int, label: str
) -> dict[Target, list[LoadResult]]:
    """Every target ``runs`` times, interleaved (a run of each, then the next run)."""
    urls = {t: (t.base or registry) + t.path for t in targets}
    avail = {
        t: None if t.what == "healthz" else unavailable(b.client, t.method, urls[t])
        for t in targets
    }
    for t in targets:
        if avail[t] is not None:
            s.rows.append(Row(f"{label}: {t.label}", f"not available: {avail[t]}"))
    res: dict[Target, list[LoadResult]] = {t: [] for t in targets if avail[t] is None}
    seconds = b.scale.wrk_seconds
    for _i in range(runs):
        for t in res:
            if b.left() < seconds + 30:
                s.notes.append(f"{label}: stopped early: time budget")
                return res
            r = run_load(t.tool, urls[t], seconds, t.method, b.work)
            res[t].append(r)
            b.log(
                f"{label} {t.tool} {t.method} {t.label}: {r.rps:.0f} req/s p50 {r.p50:.1f} ms "
                f"p99 {r.p99:.1f} ms non2xx {r.non2xx}"
            )
    return res


def _ratios(rs: list[LoadResult], refs: list[LoadResult]) -> Sample:
    """Requests/s per run, with the ratio to the reference's run of the same index."""
    out = Sample()
    for j, r in enumerate(rs):
        out.add(r.rps, ratio=r.rps / refs[j].rps if j < len(refs) else None)
    return out


def _latency(row: Row, rs: list[LoadResult], check: bool) -> tuple[float, float]:
    p50, p99 = med([r.p50 for r in rs]), med([r.p99 for r in rs])
    row.value += f"; p50 {fmt(p50)} ms, p99 {fmt(p99)} ms"
    bad = sum(r.non2xx for r in rs)
    if bad:
        row.value += f" ({bad} non-2xx)"
    if check:
        row.target += f"; p99 < {P99_TARGET_MS} ms"
        row.met += f"; p99 {verdict(p99 < P99_TARGET_MS)}"
    return p50, p99


def _report_set(
    s: Section,
    res: dict[Target, list[LoadResult]],
    label: str,
    workers: str,
    peer: list[LoadResult] | None,
) -> None:
    """Rows of one set: each target against its tool's `/healthz` and against the peer's HEAD."""
    healthz = {t.tool: rs for t, rs in res.items() if t.what == "healthz"}
    for t, rs in res.items():
        if not rs:
            continue
        is_ref = t.what == "healthz"
        sample = _ratios(rs, [] if is_ref else healthz.get(t.tool, []))
        row = value_row(
            f"{label}: {t.label} ({t.tool})",
            sample,
            "req/s",
            "" if is_ref else f"`/healthz` ({t.tool})",
            "" if is_ref else f"≥ {HEALTHZ_TARGET}×",
            None if is_ref else (lambda q: q >= HEALTHZ_TARGET),
        )
        p50, p99 = _latency(row, rs, check=not is_ref)
        s.rows.append(row)
        fact = {"rps": med(sample.values), "p50": p50, "p99": p99}
        if sample.ratios:
            fact["ratio"] = med(sample.ratios)
        if peer and t.tool == "hey" and not is_ref:
            vs_peer = _ratios(rs, peer)
            s.rows.append(
                value_row(
                    f"{label}: {t.label} ({t.tool})",
                    vs_peer,
                    "req/s",
                    "peer HEAD (hey)",
                    f"≥ {PEER_TARGET}×",
                    lambda q: q >= PEER_TARGET,
                )
            )
            fact["peer_ratio"] = med(vs_peer.ratios)
        s.facts[f"load_{workers}_{t.tool}_{t.method}_{t.what}"] = fact


def _report_scaling(
    s: Section, one: dict[Target, list[LoadResult]], two: dict[Target, list[LoadResult]]
) -> None:
    """Each figure with two workers over the same figure with one (run by run)."""
    for t, rs in two.items():
        if not rs or not one.get(t):
            continue
        is_ref = t.what == "healthz"
        sample = _ratios(rs, one[t])
        s.rows.append(
            value_row(
                f"`--workers 2`: {t.label} ({t.tool})",
                sample,
                "req/s",
                "1 worker",
                "" if is_ref else f"≥ {SCALING_TARGET}×",
                None if is_ref else (lambda q: q >= SCALING_TARGET),
            )
        )
        s.facts[f"load_scaling_{t.tool}_{t.method}_{t.what}"] = med(sample.ratios)


def measure(b: Bench, s: Section) -> None:
    if b.pushed is None:
        s.na("no carton pushed in figure 1")
        return
    if not shutil.which("wrk") or not shutil.which("hey"):
        s.na("wrk or hey not installed")
        return
    reg, peer = b.ensure_servers()
    blob_sha = next(h for p, h in b.pushed.carton.file_sha.items() if "shard-00" in p)
    peer_target = _peer_head(b, peer.url)
    targets = _targets(b.pushed.manifest, blob_sha)
    one = _measure_set(b, s, [*targets, peer_target], reg.url, b.scale.runs, "1 worker")
    peer_runs = one.pop(peer_target, [])
    if peer_runs:
        row = value_row(f"{PEER_HEAD} (hey)", Sample([r.rps for r in peer_runs]), "req/s")
        _p50, p99 = _latency(row, peer_runs, check=False)
        s.rows.append(row)
        s.facts["load_peer_hey_HEAD"] = {"rps": med([r.rps for r in peer_runs]), "p99": p99}
    _report_set(s, one, "1 worker", "w1", peer_runs)
    if b.args.workers2 and b.left() > b.scale.runs * len(targets) * (b.scale.wrk_seconds + 5) + 60:
        reg.stop()
        b.reg = None
        w2 = b.start_registry(workers=2, label="registry-workers2")
        try:
            two = _measure_set(b, s, targets, w2.url, b.scale.runs, "`--workers 2`")
        finally:
            w2.stop()
        _report_set(s, two, "`--workers 2`", "w2", None)
        _report_scaling(s, one, two)
    s.notes.append(
        f"`carton-registry serve --workers 1` (then `--workers 2`), {b.args.server}, access log "
        f"on. GET under `wrk -t2 -c{CONNECTIONS} --latency` and `hey -c {CONNECTIONS}`; HEAD "
        f"under `hey -c {CONNECTIONS} -m HEAD` only, because Debian's wrk 4.1 waits for a body "
        "after a HEAD response that carries Content-Length and stalls. Each tool's own "
        "`/healthz` run is the reference for its rows; the peer's HEAD of a blob runs under "
        "hey in the same interleaved loop. The load generator shares the 2 cores with the "
        "server, and the machine with other work (load average in the machine table)."
    )


def _title(scale: Scale) -> str:
    return (
        f"5. Slim pull and HEAD under load ({CONNECTIONS} connections, {scale.wrk_seconds} s each)"
    )


LOAD = Figure("load", _title, measure, runs_last=True)
