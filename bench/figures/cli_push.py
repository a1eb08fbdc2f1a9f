"""Figures 2 and 3: `carton-registry push` of a carton the registry already has, and of a variant.

Both count the bytes the CLI sends through a counting proxy; figure 2 also
times what a fresh CLI process costs before it sends anything. Figure 2 times
re-pushes after one untimed CLI push of the same file: the CLI reads every
member of a carton file once and remembers it verified while it is unchanged.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from bench.figures.figure import Figure
from bench.harness import PY, REPO, MiB
from bench.harness.clients import CliFailed, cli_run
from bench.harness.data import FileSpec
from bench.harness.proxy import CountingProxy
from bench.harness.session import Bench, Pushed
from bench.harness.stats import Sample, med
from bench.report.table import Row, Section, spread, value_row


def _ready(b: Bench, s: Section) -> tuple[Path, Pushed] | None:
    """(the CLI, figure 1's carton), or None with the section marked not available."""
    exe = b.cli_exe()
    if exe is None:
        s.na("`carton-registry` CLI not installed (.venv/bin/carton-registry missing)")
        return None
    if b.pushed is None:
        s.na("no carton pushed in figure 1")
        return None
    return exe, b.pushed


def cli_push(b: Bench, exe: Path, carton: Path, proxy: CountingProxy) -> float:
    """Wall time of one `carton-registry push` through the proxy, its counters reset first."""
    proxy.reset()
    dt, _ = cli_run(exe, ["push", str(carton), "--url", proxy.url], b.cli_env())
    time.sleep(0.2)  # let the proxy's pumps count the last bytes
    return dt


def measure_repush(b: Bench, s: Section) -> None:
    ready = _ready(b, s)
    if ready is None:
        return
    exe, pushed = ready
    reg, _peer = b.ensure_servers()
    proxy = CountingProxy(reg.port)
    secs, wire = Sample(), []
    try:
        cli_push(b, exe, pushed.carton.path, proxy)  # the first CLI push verifies every file
        for _i in range(b.scale.runs):
            dt = cli_push(b, exe, pushed.carton.path, proxy)
            secs.add(dt, ratio=dt / pushed.seconds)
            wire.append(proxy.up)
            b.log(f"re-push: {dt:.3f}s, {proxy.up} bytes up")
    except CliFailed as exc:
        s.na(str(exc))
        return
    finally:
        proxy.close()
    imp, bare = Sample(), Sample()
    for _ in range(b.scale.runs):
        t = time.perf_counter()
        subprocess.run([str(exe), "--help"], capture_output=True, timeout=60)
        imp.add(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run([PY, "-c", "pass"], capture_output=True, timeout=60)
        bare.add(time.perf_counter() - t)
    s.facts["cli_bare"] = med(bare.values)
    _import_times(s)
    s.rows.append(
        value_row(
            f"re-push of the {b.scale.stored_size // MiB} MiB Stored carton (CLI wall time)",
            secs,
            "s",
            "first push (fig. 1)",
            "< 0.3 s",
            lambda v: v < 0.3,
            check_on="value",
        )
    )
    s.notes.append(
        "Re-push target: issue 27's, < 0.3 s for an unchanged 1 GiB carton (the same target "
        "as figure 8's re-push). `bench/run` compiles the registry's modules to bytecode "
        "first, as installing the wheel does (this machine sets PYTHONDONTWRITEBYTECODE, so "
        "an editable install would compile every module on every start)."
    )
    s.rows.append(
        Row(
            "bytes sent on the wire (counting proxy)",
            f"{int(med(wire)):,} B",
            spread([float(w) for w in wire]),
        )
    )
    s.rows.append(value_row("`carton-registry --help` (interpreter + imports floor)", imp, "s"))
    s.rows.append(value_row("`python -c pass` (bare interpreter)", bare, "s"))
    s.facts.update(repush_s=med(secs.values), cli_floor=med(imp.values), repush_wire=med(wire))


def _import_times(s: Section) -> None:
    """The third-party packages `import registry.cli` pulls in, and through which module."""
    out = subprocess.run(
        [PY, "-X", "importtime", "-c", "import registry.cli"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    rows = []  # (cumulative us, depth, name) in importtime's order (children first)
    for line in out.stderr.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2].rstrip()
        depth = (len(name) - len(name.lstrip())) // 2
        rows.append((int(parts[1]), depth, name.strip()))
    if not rows:
        return
    total = sum(us for us, d, _ in rows if d == 0)

    def via(i: int) -> str:
        d = rows[i][1]
        chain = []
        for j in range(i + 1, len(rows)):
            if rows[j][1] < d:
                chain.append(rows[j][2])
                d = rows[j][1]
        ours = [c for c in chain if c.startswith("registry")]
        return ours[0] if ours else "(top level)"

    tops = [
        (us, n, via(i))
        for i, (us, d, n) in enumerate(rows)
        if "." not in n
        and not n.startswith(("registry", "_", "encodings", "site"))
        and n not in sys.stdlib_module_names
        and us > 5000
    ]
    tops.sort(reverse=True)
    md = [
        "",
        f"`python -X importtime -c 'import registry.cli'`: {total / 1e6:.2f} s in all; "
        "the third-party packages it loads (cumulative, > 5 ms):",
        "",
        "| package | cumulative s | first imported by |",
        "| --- | --- | --- |",
    ]
    md += [f"| `{n}` | {us / 1e6:.3f} | `{v}` |" for us, n, v in tops[:8]]
    s.extra_md = "\n".join(md)
    s.facts["cli_import_total"] = total / 1e6
    s.facts["cli_import_top"] = [(f"{n} (via {v})", us / 1e6) for us, n, v in tops[:4]]


def measure_variant(b: Bench, s: Section) -> None:
    ready = _ready(b, s)
    if ready is None:
        return
    exe, pushed = ready
    reg, _peer = b.ensure_servers()
    proxy = CountingProxy(reg.port)
    up, secs, of_size = Sample(), Sample(), []
    try:
        for i in range(b.scale.runs):
            if b.left() < 60:
                s.notes.append(f"stopped after {i} runs: time budget")
                break
            files = list(pushed.carton.files)
            k = next(j for j, f in enumerate(files) if "small-07" in f.path)
            changed = files[k].size
            files[k] = FileSpec(files[k].path, changed, f"{b.tag}/variant{i}")
            v = b.build(f"variant-{b.tag}-{i}", files)
            try:
                dt = cli_push(b, exe, v.path, proxy)
            finally:
                v.path.unlink(missing_ok=True)
            up.add(proxy.up / MiB, ratio=proxy.up / changed)
            of_size.append(proxy.up / v.size)
            secs.add(dt)
            b.log(f"variant push: {dt:.2f}s, {proxy.up} bytes up for {changed} changed")
    except CliFailed as exc:
        s.na(str(exc))
        return
    finally:
        proxy.close()
    if not up.values:
        s.na("time budget")
        return
    s.rows.append(
        value_row(
            f"bytes sent for a {pushed.carton.size // MiB} MiB carton with one "
            f"{b.scale.stored_size // 64 // MiB} MiB file changed",
            up,
            "MiB",
            "changed bytes",
            "< 1.1×",
            lambda r: r < 1.1,
        )
    )
    s.rows.append(
        value_row(
            "same, as a share of the carton size",
            Sample(up.values, of_size),
            "MiB",
            "carton size",
        )
    )
    s.rows.append(value_row("variant push wall time", secs, "s"))
    s.facts.update(variant_ratio=med(up.ratios))


REPUSH = Figure(
    "repush",
    "2. Re-push of the same carton with `carton-registry push` (nothing new)",
    measure_repush,
)
VARIANT = Figure(
    "variant", "3. Variant push: all files shared but one (`carton-registry push`)", measure_variant
)
