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


WARM_BLOCK = 64 << 20
WARM_MAX = 16 << 30


def mem_available() -> int:
    """MemAvailable in bytes (0 if /proc/meminfo cannot say)."""
    with contextlib.suppress(OSError):
        m = re.search(r"MemAvailable:\s+(\d+) kB", Path("/proc/meminfo").read_text())
        if m:
            return int(m.group(1)) * 1024
    return 0


def _touch(size: int) -> float:
    """Map ``size`` bytes in 64 MiB anonymous blocks, write every byte, hold them all
    until the last is written, then unmap; seconds spent writing."""
    import mmap

    pattern = b"\x5a" * WARM_BLOCK
    blocks: list[mmap.mmap] = []
    t = time.perf_counter()
    try:
        for _ in range(size // WARM_BLOCK):
            m = mmap.mmap(-1, WARM_BLOCK)
            m.write(pattern)
            blocks.append(m)
        return time.perf_counter() - t
    finally:
        for m in blocks:
            m.close()


def warm_memory(max_bytes: int = WARM_MAX, timeout: float = 300.0) -> dict[str, float]:
    """Write min(80 % of MemAvailable, ``max_bytes``) of fresh memory once, in a child process.

    On this VM the host backs guest pages lazily: the first touch of memory is slow
    (16 GiB took 44 s the first time, 18 s the second), and until it is done every
    page-cache write of a push runs 2-4x slower, so push figures swung 190-390 MiB/s
    from run to run. All blocks are held at once so they are distinct pages; the child
    exits, so all of it is free again before anything is measured. Returns bytes,
    seconds and MiB/s written (a low rate: pages the host had not backed yet).
    """
    size = min(int(mem_available() * 0.8), max_bytes) // WARM_BLOCK * WARM_BLOCK
    if size <= 0:
        return {"bytes": 0.0, "seconds": 0.0, "mib_s": 0.0}
    code = f"from bench.harness.machine import _touch; print(_touch({size}))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    seconds = float(out.stdout.strip().splitlines()[-1])
    return {"bytes": float(size), "seconds": seconds, "mib_s": size / (1 << 20) / seconds}


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
