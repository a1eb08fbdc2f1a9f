"""Carton Registry benchmarks: every figure as a ratio measured in the same run.

Run through ``bench/run`` (installs what it needs, then calls this). It builds its
own data under ``bench/out/`` (git-ignored), starts the registry (uvicorn
serve``) and the peer (Debian's docker-registry, distribution 2.8) on
127.0.0.1, measures, writes BENCHMARKS.md and removes its data.

A figure whose endpoint or command does not exist yet is reported as
"not available: <why>"; the rest still run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench.figures import FIGURES, run_order
from bench.harness import REPO, GiB
from bench.harness.data import pool
from bench.harness.machine import load_average, machine_info, warm_memory
from bench.harness.session import Bench
from bench.report.markdown import merged_facts, render
from bench.report.table import Section


def parse_size(text: str) -> int:
    """``16G``, ``16GiB``, ``512M``, ``512MiB`` or bytes: a size in bytes (powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 16G, 1GiB, 512M)")
    power = " KMGT".index(m.group(2).upper() or " ")
    return int(float(m.group(1)) * 1024**power)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    keys = [f.key for f in run_order()]
    ap = argparse.ArgumentParser(
        prog="bench/run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="1 run, smaller data (≈3 min)")
    ap.add_argument("--runs", type=int, default=3, help="runs per figure (median; default 3)")
    ap.add_argument(
        "--backend",
        choices=["sqlite", "postgres"],
        default="sqlite",
        help="database for figures 1-6 (figure 7 always uses Postgres)",
    )
    ap.add_argument(
        "--pg-url",
        default=os.environ.get("BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="Postgres admin URL; fresh databases are created and dropped",
    )
    ap.add_argument("--only", default="", help=f"comma-separated subset of: {','.join(keys)}")
    ap.add_argument("--out", default=str(REPO / "BENCHMARKS.md"), help="report path")
    ap.add_argument("--workdir", default=None, help="data directory (default bench/out/run-<time>)")
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    ap.add_argument(
        "--budget", type=float, default=1500.0, help="seconds before remaining figures are skipped"
    )
    ap.add_argument(
        "--server",
        choices=["uvicorn", "granian"],
        default="uvicorn",
        help="the registry's ASGI server (`serve --server`) for every figure but `servers`",
    )
    ap.add_argument("--wrk-seconds", type=int, default=10)
    ap.add_argument(
        "--no-workers2",
        dest="workers2",
        action="store_false",
        help="skip the extra `--workers 2` load run",
    )
    ap.add_argument(
        "--no-warm-memory",
        dest="warm_memory",
        action="store_false",
        help="skip writing most of the free memory once before the first figure",
    )
    ap.add_argument(
        "--warm-memory-max",
        type=float,
        default=16.0,
        metavar="GIB",
        help="cap on the memory warm-up (default 16 GiB; it writes 80%% of MemAvailable)",
    )
    ap.add_argument(
        "--big-size",
        type=parse_size,
        default=16 * GiB,
        metavar="SIZE",
        help="carton size of the opt-in `big` figure: 16G (default), 1GiB, 512M, ...",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.budget = min(args.budget, 300.0)
    args.only = [x.strip() for x in args.only.split(",") if x.strip()]
    bad = [x for x in args.only if x not in keys]
    if bad:
        ap.error(f"unknown figure(s) {bad}; choose from {keys}")
    return args


def _warm(b: Bench, args: argparse.Namespace) -> str:
    """Touch most of the free memory once (machine.warm_memory); the machine table's line."""
    if not args.warm_memory:
        return "skipped (--no-warm-memory)"
    try:
        w = warm_memory(int(args.warm_memory_max * GiB))
    except Exception as exc:
        b.log(f"memory warm-up failed: {type(exc).__name__}: {exc}")
        return f"failed: {type(exc).__name__}"
    line = (
        f"{w['bytes'] / GiB:.1f} GiB written once in {w['seconds']:.1f} s "
        f"({w['mib_s']:.0f} MiB/s) before the first figure"
    )
    b.log(f"memory warm-up: {line}")
    return line


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    b = Bench(args)

    def on_signal(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    rc = 0
    info = machine_info()
    b.log(f"work dir {b.work}; {info['nproc']} CPUs; budget {args.budget:.0f}s")
    info["memory warm-up"] = _warm(b, args)
    sections: dict[str, Section] = {}
    try:
        pool()
        for fig in run_order():
            if (args.only and fig.key not in args.only) or (fig.opt_in and not args.only):
                continue
            b.log(f"== {fig.key}")
            s = sections[fig.key] = fig.section(b.scale)
            try:
                fig.measure(b, s)
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                traceback.print_exc()
                s.notes.append(f"failed: {type(exc).__name__}: {str(exc)[:300]}")
                rc = 1
                # a dead server is restarted by the next figure
    except KeyboardInterrupt:
        b.log("interrupted: writing what was measured")
        rc = 130
    finally:
        try:
            info["load average at end"] = load_average()
            ordered = [sections[f.key] for f in FIGURES if f.key in sections]
            page = render(
                ordered,
                b.scale,
                info,
                command=f"bench/run {' '.join(sys.argv[1:])}",
                backend=args.backend,
                minutes=(time.monotonic() - b.started) / 60,
            )
            Path(args.out).write_text(page)
            out_dir = REPO / "bench" / "out"
            out_dir.mkdir(exist_ok=True)
            run = list(sections.values())  # facts in the order they were measured
            (out_dir / "last-facts.json").write_text(
                json.dumps(merged_facts(run), indent=2, default=str)
            )
            b.log(f"wrote {args.out}")
        finally:
            b.cleanup()
    return rc


if __name__ == "__main__":
    sys.exit(main())
