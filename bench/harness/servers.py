"""Processes the bench starts: the registry, the peer (Debian's docker-registry), a bare receiver.

Every process gets its own session (so a stop reaches its children) and is
tracked until stopped; ``stop_all`` ends whatever a failed figure left running.
All servers bind to 127.0.0.1 on a free port.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.harness import PY, REPO

_PROCS: list[subprocess.Popen] = []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_proc(cmd: list[str], env: dict[str, str] | None, log: Path) -> subprocess.Popen:
    """Start ``cmd`` in its own process group, stdout and stderr appended to ``log``."""
    logf = open(log, "ab")  # noqa: SIM115 - closed with the process
    p = subprocess.Popen(
        cmd,
        env=env,
        stdout=logf,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    p._bench_log = logf  # type: ignore[attr-defined]
    _PROCS.append(p)
    return p


def stop_proc(p: subprocess.Popen | None, sig: int = signal.SIGTERM, timeout: float = 15) -> None:
    """Send ``sig`` to the process group, wait ``timeout`` s, then SIGKILL."""
    if p is None:
        return
    if p.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, sig)  # our own process group (start_new_session)
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
    with contextlib.suppress(Exception):
        p._bench_log.close()  # type: ignore[attr-defined]
    if p in _PROCS:
        _PROCS.remove(p)


def stop_all() -> None:
    for p in list(_PROCS):
        stop_proc(p)


def proc_pss(pid: int) -> int | None:
    """Proportional set size (/proc/<pid>/smaps_rollup ``Pss``) in bytes: shared pages
    divided among the processes that map them."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    m = re.search(r"^Pss:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) * 1024 if m else None


def proc_status(pid: int, key: str) -> int | None:
    """A kB field of /proc/<pid>/status (VmHWM, VmRSS) in bytes."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(rf"^{key}:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) * 1024 if m else None


def tree_pids(pid: int) -> list[int]:
    """``pid`` and its descendants (a server's workers, and theirs), parent first."""
    pids = [pid]
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            kids = [int(c) for c in children.read_text().split()]
        except OSError:
            continue
        for kid in kids:
            pids += tree_pids(kid)
    return pids


def tree_values(pid: int, key: str) -> list[int]:
    """``key`` (e.g. VmHWM) of every live process of ``pid``'s tree, in bytes."""
    found = [proc_status(p, key) for p in tree_pids(pid)]
    return [v for v in found if v is not None]


def tree_status(pid: int, key: str) -> int | None:
    """The largest ``key`` (e.g. VmHWM) of ``pid`` and its descendants: a server's workers."""
    values = tree_values(pid, key)
    return max(values) if values else None


def tree_sum(pid: int, key: str) -> int | None:
    """``key`` summed over ``pid`` and its descendants: the whole server, workers included.

    Shared pages (the interpreter, libraries mapped by every worker) count once per
    process, so a sum of RSS is an upper bound on the memory the tree holds.
    """
    values = tree_values(pid, key)
    return sum(values) if values else None


class RssSampler:
    """Peaks of a process tree's summed VmRSS and summed Pss, sampled every ``interval`` s
    on a thread: the memory the whole tree held at once (a sum of VmHWM adds peaks that
    need not coincide). Use as a context manager around a transfer.
    """

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_rss = 0
        self.peak_pss = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def sample(self) -> None:
        pids = tree_pids(self.pid)
        rss = [proc_status(p, "VmRSS") for p in pids]
        pss = [proc_pss(p) for p in pids]
        self.peak_rss = max(self.peak_rss, sum(v for v in rss if v is not None))
        self.peak_pss = max(self.peak_pss, sum(v for v in pss if v is not None))
        self.samples += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def wait_http(url: str, timeout: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before {url} answered")
        try:
            r = httpx.get(url, timeout=2)
            if r.status_code < 500:
                return
            last = f"HTTP {r.status_code}"
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout}s ({last})")


def tail(path: Path, n: int = 2000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-n:].decode("utf-8", "replace")


@dataclass
class Server:
    proc: subprocess.Popen
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the server process has used so far (Linux /proc)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        stop_proc(self.proc)


def _serve(
    what: str, cmd: list[str], port: int, env: dict[str, str], log: Path, ready: str, wait: float
) -> Server:
    """Start a server and wait until ``ready`` answers; its log's tail in the error if not."""
    server = Server(start_proc(cmd, env, log), port)
    try:
        wait_http(server.url + ready, wait, server.proc)
    except Exception:
        server.stop()
        raise RuntimeError(f"{what} did not start: {tail(log, 800)}") from None
    return server


def _uvicorn(app: list[str], port: int) -> list[str]:
    return [
        PY, "-m", "uvicorn", *app,
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log",
    ]  # fmt: skip


def start_registry(
    data_dir: Path,
    log: Path,
    database_url: str | None = None,
    workers: int | None = 1,
    server: str = "uvicorn",
    settings: dict[str, str] | None = None,
) -> Server:
    """``carton-registry serve``, as an operator runs it (access log on, into ``log``);
    ``workers=None``: no ``--workers``, serve's default (1); ``settings``:
    extra ``REGISTRY_*`` variables."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REGISTRY_", "PROMETHEUS_"))}
    env.update(
        REGISTRY_DATA_DIR=str(data_dir),
        REGISTRY_PUBLIC_URL=f"http://127.0.0.1:{port}",
        REGISTRY_AUTH="off",
        PYTHONUNBUFFERED="1",
    )
    if database_url:
        env["REGISTRY_DATABASE_URL"] = database_url
    env.update(settings or {})
    cmd = [PY, "-m", "registry.cli", "serve", "--port", str(port)]
    if workers is not None:
        cmd += ["--workers", str(workers)]
    cmd += ["--server", server]
    return _serve("registry", cmd, port, env, log, "/healthz", 60)


def start_receiver(work: Path, log: Path) -> Server:
    """harness/recv_app.py on uvicorn: the receive ceiling for the push figure."""
    port = free_port()
    cmd = _uvicorn(["bench.harness.recv_app:app", "--app-dir", str(REPO)], port)
    return _serve("receiver", cmd, port, dict(os.environ, RECV_DIR=str(work)), log, "/discard", 30)


PEER_CONFIG = """\
version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: {root}
  delete:
    enabled: true
  cache:
    blobdescriptor: inmemory
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: 127.0.0.1:{port}
  secret: bench-not-a-secret
health:
  storagedriver:
    enabled: false
"""


def start_peer(root: Path, log: Path) -> Server:
    exe = shutil.which("docker-registry")
    if not exe:
        raise RuntimeError("docker-registry is not installed (apt-get install docker-registry)")
    port = free_port()
    root.mkdir(parents=True, exist_ok=True)
    cfg = root.parent / f"peer-config-{port}.yml"
    cfg.write_text(PEER_CONFIG.format(root=root, port=port))
    return _serve("peer", [exe, "serve", str(cfg)], port, dict(os.environ), log, "/v2/", 30)
