"""What the numbers were measured on: the machine table at the top of BENCHMARKS.md."""

from __future__ import annotations

import contextlib
import importlib.metadata as md
import os
import re
import subprocess
import sys
import time
from pathlib import Path


def _version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except Exception:
        return "not installed"


def _package(name: str) -> str:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "not installed"


def load_average() -> str:
    """The 1, 5 and 15 minute load averages and the number of CPUs, for the report."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f}, {five:.1f}, {fifteen:.1f} on {os.cpu_count()} CPUs"


def machine_info() -> dict[str, str]:
    cpu = "unknown"
    flags = ""
    with contextlib.suppress(OSError):
        text = Path("/proc/cpuinfo").read_text()
        for line in text.splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        flags = ", ".join(f for f in ("sha_ni", "avx2", "avx512f") if f" {f}" in text)
    mem = "?"
    with contextlib.suppress(OSError):
        m = re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text())
        if m:
            mem = f"{int(m.group(1)) / 1024 / 1024:.1f} GiB"
    return {
        "nproc": str(os.cpu_count()),
        "CPU": cpu + (f" ({flags})" if flags else ""),
        "memory": mem,
        "kernel": os.uname().release,
        "python": sys.version.split()[0],
        "server": (
            f"uvicorn {_package('uvicorn')} (httptools {_package('httptools')}, "
            f"uvloop {_package('uvloop')}), granian {_package('granian')}, "
            f"litestar {_package('litestar')}"
        ),
        "load average at start": load_average(),
        "peer": _version(["docker-registry", "--version"]),
        "wrk": _version(["wrk", "--version"]).split(" Copyright")[0],
        "curl": _version(["curl", "--version"]).split(" (")[0],
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
