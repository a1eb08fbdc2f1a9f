"""The server's CPU over one push, split by the library that spent it (``perf record``).

py-spy (``profile``) samples every thread that is not asleep, so a thread waiting for a
core or for the GIL counts as busy there: its shares say where threads *are*, not what
the cores *do*. perf samples the CPU itself: which shared object was running (OpenSSL's
sha256, pyfastcdc, blake3, ISA-L's CRC-32, SQLite, the interpreter, libc's copies, the
kernel), so the split adds up to the process's CPU time, in seconds a GiB.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from bench.harness.servers import start_proc, stop_proc, tail

PERF_HZ = 999
CPU_LIBRARIES: list[tuple[str, str]] = [
    # (part of the shared object's name, what the registry spends it on)
    ("libcrypto", "sha256 of every file (OpenSSL)"),
    ("fastcdc", "FastCDC cutting (pyfastcdc)"),
    ("blake3", "BLAKE3 chunk names (blake3)"),
    ("isal", "CRC-32 of every member (ISA-L)"),
    ("sqlite", "SQLite"),
    ("libpython", "Python interpreter"),
    ("libc.so", "libc: copies (memmove) and allocation"),
    ("[kernel", "kernel: socket receive, pack and database writes, scheduling"),
]
OTHER = "other shared objects"
_LINE = re.compile(r"^\s*[\d.]+%\s+(\d+)\s+(\S.*?)\s*$")


def record(pid: int, out: Path, log: Path) -> subprocess.Popen[bytes] | None:
    """``perf record`` of the process ``pid`` into ``out`` (None without perf)."""
    perf = shutil.which("perf")
    if perf is None:
        return None
    cmd = [perf, "record", "-q", "-F", str(PERF_HZ), "-p", str(pid), "-o", str(out)]
    proc = start_proc(cmd, None, log)
    time.sleep(1.0)  # attached before the push starts
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    stop_proc(proc, signal.SIGINT, timeout=60)  # perf writes its file on SIGINT


def split(data: Path) -> dict[str, float]:
    """CPU-seconds per ``CPU_LIBRARIES`` label (and ``OTHER``) in ``data``; empty when
    perf could not read it."""
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--stdio", "--no-children", "--sort", "dso", "-n"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return seconds_by_library(report.stdout)


def seconds_by_library(report: str) -> dict[str, float]:
    """``perf report --sort dso -n`` read as CPU-seconds per ``CPU_LIBRARIES`` label."""
    seconds: dict[str, float] = {}
    for line in report.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        samples, dso = int(match.group(1)), match.group(2)
        label = next((what for part, what in CPU_LIBRARIES if part in dso), OTHER)
        seconds[label] = seconds.get(label, 0.0) + samples / PERF_HZ
    return seconds


def markdown(seconds: dict[str, float], gib: float, wall: float, log: Path) -> str:
    """The split as a table, per GiB pushed, or why there is none."""
    total = sum(seconds.values())
    if total == 0:
        return f"\nperf: no samples ({tail(log, 300) or 'perf not installed (Debian: linux-perf)'})"
    md = [
        "",
        f"perf, {PERF_HZ} Hz, the server process over a second fresh push, of the reference "
        f"packer's shape (sizes and CRCs in the local headers, as the targets), {wall:.1f} s: "
        f"{total:.2f} CPU-seconds, {total / gib:.2f} a GiB; what the cores ran, by library "
        "(py-spy's busy time above also counts threads waiting for a core or the GIL).",
        "",
        "| CPU (perf, by shared object) | CPU-s a GiB | share |",
        "| --- | --- | --- |",
    ]
    for _, what in [*CPU_LIBRARIES, ("", OTHER)]:
        if what in seconds:
            s = seconds[what]
            md.append(f"| {what} | {s / gib:.2f} | {100 * s / total:.0f} % |")
    return "\n".join(md)
