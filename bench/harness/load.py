"""HTTP load generators: wrk for GET, hey for HEAD, both parsed into one result shape."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

CONNECTIONS = 32


@dataclass(frozen=True)
class LoadResult:
    rps: float
    p50: float  # ms
    p99: float  # ms
    non2xx: int


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60000.0}


def _ms(text: str) -> float:
    m = re.match(r"([\d.]+)(us|ms|s|m)$", text.strip())
    if not m:
        return float("nan")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _run(cmd: list[str], seconds: int) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
    if out.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({out.returncode}): {out.stderr[:300]}")
    return out.stdout


def _rps(text: str) -> float:
    m = re.search(r"Requests/sec:\s+([\d.]+)", text)
    return float(m.group(1)) if m else float("nan")


def _wrk(url: str, seconds: int, method: str, workdir: Path) -> LoadResult:
    cmd = ["wrk", "-t2", f"-c{CONNECTIONS}", f"-d{seconds}s", "--latency", "--timeout", "5s"]
    if method != "GET":
        script = workdir / f"wrk-{method.lower()}.lua"
        script.write_text(f'wrk.method = "{method}"\n')
        cmd += ["-s", str(script)]
    text = _run([*cmd, url], seconds)
    lat = dict(re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", text, re.M))
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    return LoadResult(
        rps=_rps(text),
        p50=_ms(lat.get("50", "nan")),
        p99=_ms(lat.get("99", "nan")),
        non2xx=int(non2xx.group(1)) if non2xx else 0,
    )


def _hey(url: str, seconds: int, method: str) -> LoadResult:
    """`hey` (Debian) for HEAD: Debian's wrk 4.1 waits for a HEAD response's body and stalls."""
    cmd = ["hey", "-z", f"{seconds}s", "-c", str(CONNECTIONS), "-m", method, "-t", "5", url]
    text = _run(cmd, seconds)
    lat = dict(re.findall(r"^\s+(\d+)% in ([\d.]+) secs", text, re.M))
    codes = re.findall(r"\[(\d+)\]\s+(\d+) responses", text)
    return LoadResult(
        rps=_rps(text),
        p50=float(lat.get("50", "nan")) * 1000,
        p99=float(lat.get("99", "nan")) * 1000,
        non2xx=sum(int(n) for c, n in codes if not c.startswith(("2", "3"))),
    )


def run_load(tool: str, url: str, seconds: int, method: str, workdir: Path) -> LoadResult:
    """``CONNECTIONS`` connections for ``seconds`` with ``tool`` ("wrk" or "hey")."""
    if tool == "wrk":
        return _wrk(url, seconds, method, workdir)
    return _hey(url, seconds, method)
