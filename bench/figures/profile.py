"""Where a push's time goes: one extra push under py-spy, and the same bytes ingested in-process.

The difference between the HTTP push and ``ingest_file()`` on the same bytes is
the receive share (a push streams: there is no spool); py-spy's samples split the
server's busy time by phase.
"""

from __future__ import annotations

import linecache
import shutil
import signal
import sysconfig
import time
from collections import Counter
from pathlib import Path

from bench.figures import cpu_split
from bench.figures.chunk_transfer import empty_registry
from bench.figures.figure import Figure
from bench.harness import REPO, VENV_BIN, GiB, MiB
from bench.harness.clients import push_registry
from bench.harness.data import stored_layout
from bench.harness.servers import Server, start_proc, stop_proc, tail
from bench.harness.session import Bench
from bench.report.table import Row, Section, fmt

SAMPLE_RATE = 100  # py-spy samples per second

# First match wins, so the phases add up to 100 %. "leaf": the innermost Python frame (the
# line that called into C: hashlib, zlib, pyfastcdc, blake3); "stack": any frame. The push
# streams (no spool): each member is hashed, cut, named and written as the body arrives.
PHASES: list[tuple[str, str, tuple[str, ...]]] = [
    (
        # On a hashing thread of its own since 2026-11-29 (FileWriter._hash); a small file is
        # hashed whole at close_later. What write, write_chunk and _accept do on the reading
        # thread (a copy, a chunk upload's CRC-32) is "rest of ingest".
        "sha256 of each file (chunkstore/files.py FileWriter, on its hashing thread)",
        "leaf",
        (
            "FileWriter._hash (registry/services/chunkstore/files.py",
            "FileWriter.close_later (registry/services/chunkstore/files.py",
        ),
    ),
    ("zip: member reading and CRC-32 (registry/carton/zip*)", "leaf", ("registry/carton/zip",)),
    ("BLAKE3 chunk names (chunk_hash)", "leaf", ("chunk_hash (",)),
    ("FastCDC cutting (registry/chunking.py Chunker)", "leaf", ("registry/chunking.py",)),
    ("pack and blob writes, fsync (registry/blobstore)", "stack", ("registry/blobstore/",)),
    (
        "database: SQLAlchemy, leases, claims, index rows",
        "stack",
        ("sqlalchemy/", "registry/db/", "psycopg/", "sqlite3"),
    ),
    (
        "waiting on another thread (futures, locks, queues)",
        "leaf",
        ("threading.py", "concurrent/futures", "queue.py"),
    ),
    (
        # A body of 8 MiB or more is read from its socket by the ingest thread (2026-11-29).
        "receive: the body read from its socket (registry/http/body_socket.py, deps.py)",
        "leaf",
        ("registry/http/body_socket.py", "registry/http/deps.py"),
    ),
    (
        "rest of ingest (registry/services, registry/carton)",
        "stack",
        ("registry/services/", "registry/carton/"),
    ),
    ("receive: event loop, uvicorn/httptools, Litestar/ASGI", "stack", ("",)),
]


def measure(b: Bench, s: Section) -> None:
    if b.left() < 150:
        s.na("time budget")
        return
    with empty_registry(b, "profile") as reg:
        _profile(b, s, reg)


def _profile(b: Bench, s: Section, reg: Server) -> None:
    """The profiled push and the perf push go into ``reg``, a registry of their own that
    starts empty as the in-process store does: pushed into the run's shared registry,
    which holds about 11 GiB of the earlier figures by then, the push took 5.2 s against
    3.1 s in-process on 2026-11-29, and the difference was no longer receiving alone
    (a registry holding data costs a push 10-13 % on that host, BENCHMARKS.md)."""
    c = b.build(f"profile-{b.tag}", stored_layout("weights", f"{b.tag}/prof", b.scale.stored_size))
    mib = c.size / MiB
    raw = b.work / "pyspy.txt"
    spy_log = b.logs / "py-spy.log"
    spy = None
    if (VENV_BIN / "py-spy").exists():
        record = [
            str(VENV_BIN / "py-spy"), "record", "--pid", str(reg.pid), "--rate", str(SAMPLE_RATE),
            "--format", "raw", "--output", str(raw), "--nonblocking", "--threads",
        ]  # fmt: skip
        spy = start_proc(record, None, spy_log)
        time.sleep(1.0)
    t_push, _ = push_registry(b.client, reg.url, c.path)
    if spy is not None:
        stop_proc(spy, signal.SIGINT, timeout=60)  # py-spy writes its samples on SIGINT
    t_ingest = _ingest_in_process(b, c.path)
    c.path.unlink(missing_ok=True)
    s.rows.append(
        Row(
            "push over HTTP (profiled, py-spy attached)",
            f"{fmt(mib / t_push)} MiB/s",
            f"{t_push:.2f} s",
        )
    )
    if t_ingest is not None:
        s.rows.append(
            Row(
                "`ingest_file()` in-process on the same bytes (no HTTP)",
                f"{fmt(mib / t_ingest)} MiB/s",
                f"{t_ingest:.2f} s",
            )
        )
        s.rows.append(
            Row(
                "⇒ receive share of the push (push − ingest)",
                f"{fmt(max(0.0, t_push - t_ingest))} s",
                f"{100 * max(0.0, t_push - t_ingest) / t_push:.0f} % of the push",
            )
        )
    s.facts.update(prof_push_s=t_push, prof_ingest_s=t_ingest, prof_mib=mib)
    if spy is None or not raw.exists():
        s.notes.append(
            f"py-spy profile not available: {tail(spy_log, 300) or 'py-spy not installed'}"
        )
    else:
        _hotspots(s, raw, t_push)
    _perf_push(b, s, reg)


def _perf_push(b: Bench, s: Section, reg: Server) -> None:
    """Another fresh push, under ``perf record``: what the server's cores ran (``cpu_split``),
    for the reference packer's shape (the targets'), where the py-spy push above has data
    descriptors (as the profile had before: its "Before" compares), whose scan for the
    descriptor's signature costs the reading thread about 0.35 CPU-s a GiB (``re``)."""
    c = b.build(
        f"perf-{b.tag}",
        stored_layout("weights", f"{b.tag}/perf", b.scale.stored_size),
        sized=True,
    )
    data, log = b.work / "perf.data", b.logs / "perf.log"
    perf = cpu_split.record(reg.pid, data, log)
    t_push, _ = push_registry(b.client, reg.url, c.path)
    seconds: dict[str, float] = {}
    if perf is not None:
        cpu_split.stop(perf)
        if data.exists():  # kept with the run's work dir (--keep: `perf report -i` it)
            seconds = cpu_split.split(data)
    c.path.unlink(missing_ok=True)
    s.extra_md += "\n" + cpu_split.markdown(seconds, c.size / GiB, t_push, log)
    s.facts["cpu_split"] = {what: sec / (c.size / GiB) for what, sec in seconds.items()}


def _ingest_in_process(b: Bench, path: Path) -> float | None:
    """Seconds of ``ingest_file()`` on the carton into a fresh store: no HTTP."""
    try:
        from registry.services.context import RegistryContext
        from registry.services.ingest import ingest_file
        from registry.settings import Settings

        d = b.work / "inproc"
        ctx = RegistryContext.open(Settings(data_dir=d), migrate=True)
        try:
            t = time.perf_counter()
            ingest_file(ctx, path)
            return time.perf_counter() - t
        finally:
            ctx.close()
            shutil.rmtree(d, ignore_errors=True)
    except Exception as exc:
        b.log(f"in-process ingest failed: {exc}")
        return None


def _source_line(frame: str) -> str:
    """The source line of a py-spy frame "func (path:line)", looked up in the repo or the venv."""
    roots = [
        REPO,
        REPO / ".venv/lib/python3.11/site-packages",
        Path(sysconfig.get_paths()["stdlib"]),
    ]
    try:
        loc = frame.rsplit(" (", 1)[1].rstrip(")")
        fpath, line = loc.rsplit(":", 1)
        for root in roots:
            p = root / fpath
            if p.exists():
                return linecache.getline(str(p), int(line)).strip()
    except (IndexError, ValueError):
        pass
    return ""


def _hotspots(s: Section, raw: Path, wall: float) -> None:
    """Top self-time frames and an exclusive phase split from py-spy's collapsed stacks."""
    rate = SAMPLE_RATE
    leaf: Counter[str] = Counter()
    phase_n: Counter[str] = Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = [f for f in stack.split(";") if not f.startswith(("thread (", "process "))]
        if not frames:
            continue
        total += n
        leaf[frames[-1]] += n
        joined = ";".join(frames)
        for ph, where, keys in PHASES:
            text = frames[-1] if where == "leaf" else joined
            if any(k in text for k in keys):
                phase_n[ph] += n
                break
    if total == 0:
        s.notes.append("py-spy recorded no samples")
        return
    cpu = total / rate
    md = [
        "",
        f"py-spy, {rate} Hz, all threads, idle threads excluded: {total} samples = {cpu:.1f} "
        f"busy thread-seconds during a {wall:.1f} s push ({cpu / wall:.2f} threads busy in "
        "the server on average; a thread blocked in write() or fsync() counts as busy).",
        "",
        "| top self time (innermost frame) | source line | busy s | share |",
        "| --- | --- | --- | --- |",
    ]
    top = []
    for frame, n in leaf.most_common(5):
        src = _source_line(frame)
        md.append(f"| `{frame}` | `{src}` | {n / rate:.1f} | {100 * n / total:.0f} % |")
        top.append((frame, src, n / rate, 100 * n / total))
    md += ["", "| phase (exclusive, first match) | busy s | share |", "| --- | --- | --- |"]
    for ph, _, _ in PHASES:
        n = phase_n.get(ph, 0)
        md.append(f"| {ph} | {n / rate:.1f} | {100 * n / total:.0f} % |")
    s.extra_md = "\n".join(md)
    s.facts["hotspots"] = top
    s.facts["phases"] = {
        ph: (phase_n.get(ph, 0) / rate, 100 * phase_n.get(ph, 0) / total) for ph, _, _ in PHASES
    }
    s.facts["prof_cpu"] = cpu


PROFILE = Figure("profile", "Where a push's time goes (one extra fresh push, profiled)", measure)
