"""Benchmark plumbing: data generation, processes, a counting proxy, wrk, statistics.

Everything here is bounded: every wait has a deadline, every loop a count, and
every process started is tracked so it can be stopped at exit.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

MiB = 1 << 20
GiB = 1 << 30
CHUNK = MiB
REPO = Path(__file__).resolve().parents[1]
VENV_BIN = REPO / ".venv" / "bin"
PY = str(VENV_BIN / "python")

# --------------------------------------------------------------------------- stats


def med(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


@dataclass
class Sample:
    """Per-run values of one measurement (and, where it has one, its per-run ratio)."""

    values: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)

    def add(self, value: float, ratio: float | None = None) -> None:
        self.values.append(value)
        if ratio is not None:
            self.ratios.append(ratio)


# --------------------------------------------------------------------------- data

_POOL: bytes | None = None
POOL_SIZE = 64 * MiB


def pool() -> bytes:
    """64 MiB of random bytes made once; files are 1 MiB slices at seeded offsets."""
    global _POOL
    if _POOL is None:
        _POOL = os.urandom(POOL_SIZE)
    return _POOL


@dataclass(frozen=True)
class FileSpec:
    path: str
    size: int
    seed: str  # content is a pure function of (seed, size, compressible)
    compressible: bool = False


class GenReader(io.RawIOBase):
    """A file's bytes, generated 1 MiB at a time; sha256 computed as it is read.

    Every 1 MiB chunk starts with 32 bytes unique to (seed, chunk index), so no two
    files (or runs) share content. ``compressible`` chunks are 2 KiB random then
    2 KiB of zeros per 4 KiB: zstd level 3 shrinks them about 2:1.
    """

    def __init__(self, spec: FileSpec) -> None:
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.left = spec.size
        self.k = 0
        self.buf = b""
        self.sha = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def _chunk(self) -> bytes:
        n = min(CHUNK, self.left)
        p = pool()
        if self.spec.compressible:
            half = n // 2
            off = self.rng.randrange(0, POOL_SIZE - half)
            src = memoryview(p)[off : off + half]
            out = bytearray(n)
            step = 2048
            for i in range(0, half, step):  # 256 slice copies per MiB: cheap
                j = 2 * i
                out[j : j + step] = src[i : i + step]
        else:
            off = self.rng.randrange(0, POOL_SIZE - n)
            out = bytearray(p[off : off + n])
        tag = hashlib.sha256(f"{self.spec.seed}/{self.k}".encode()).digest()
        out[: min(32, n)] = tag[: min(32, n)]
        self.k += 1
        self.left -= n
        return bytes(out)

    def read(self, size: int = -1) -> bytes:
        if not self.buf:
            if self.left <= 0:
                return b""
            self.buf = self._chunk()
        if size is None or size < 0 or size >= len(self.buf):
            data, self.buf = self.buf, b""
        else:
            data, self.buf = self.buf[:size], self.buf[size:]
        self.sha.update(data)
        return data

    def readall(self) -> bytes:
        return b"".join(iter(lambda: self.read(CHUNK), b""))


def carton_toml(name: str) -> bytes:
    return (
        "spec_version = 1\n"
        f"model_name = {name!r}\n"
        'short_description = "benchmark data"\n\n'
        "[runner]\n"
        "runner_name = 'noop'\n"
        "required_framework_version = '=1.0.0'\n"
        "runner_compat_version = 1\n"
    ).encode()


@dataclass
class BuiltCarton:
    path: Path
    size: int
    manifest_sha256: str
    file_sha: dict[str, str]  # path -> sha256
    files: list[FileSpec]
    compressed: bool


def build_carton(
    out: Path, name: str, files: Sequence[FileSpec], zstd: bool = False
) -> BuiltCarton:
    """Write a carton with the project's own zip writer (Stored or zstd level 3 members)."""
    from registry.carton.zipwrite import STORED, ZSTD, write_zip

    toml = carton_toml(name)
    shas: dict[str, str] = {"carton.toml": hashlib.sha256(toml).hexdigest()}
    readers: list[GenReader] = []

    def members() -> Iterator[tuple[str, Callable[[], Any], int]]:
        yield "carton.toml", lambda: io.BytesIO(toml), STORED
        for spec in files:
            r = GenReader(spec)
            readers.append(r)
            yield spec.path, (lambda r=r: r), ZSTD if zstd else STORED
        for r in readers:
            shas[r.spec.path] = r.sha.hexdigest()
        items = sorted(shas.items(), key=lambda e: e[0].encode())
        manifest = "".join(f"{p}={h}\n" for p, h in items).encode()
        shas["\0manifest"] = hashlib.sha256(manifest).hexdigest()
        yield "MANIFEST", lambda: io.BytesIO(manifest), STORED

    with open(out, "wb") as f:
        size = write_zip(f, members())
    msha = shas.pop("\0manifest")
    return BuiltCarton(out, size, msha, shas, list(files), zstd)


def stored_layout(prefix: str, seed: str, total: int) -> list[FileSpec]:
    """7/8 of ``total`` in 7 big files, 1/8 in 8 small ones (1 GiB: 7x128 MiB + 8x16 MiB)."""
    big, small = total // 8, total // 64
    specs = [FileSpec(f"{prefix}/shard-{i:02d}.bin", big, f"{seed}/big/{i}") for i in range(7)]
    specs += [FileSpec(f"{prefix}/small-{i:02d}.bin", small, f"{seed}/small/{i}") for i in range(8)]
    return specs


def equal_layout(prefix: str, seed: str, total: int, count: int, compressible: bool = False):
    size = total // count
    return [
        FileSpec(f"{prefix}/part-{i:02d}.bin", size, f"{seed}/{i}", compressible)
        for i in range(count)
    ]


def member_data_ranges(path: Path) -> list[tuple[str, int, int, int]]:
    """(name, data offset, compressed size, method) of each member, from the central directory."""
    out = []
    with open(path, "rb") as f, zipfile.ZipFile(f) as z:
        for info in z.infolist():
            f.seek(info.header_offset)
            local = f.read(30)
            nlen = int.from_bytes(local[26:28], "little")
            xlen = int.from_bytes(local[28:30], "little")
            start = info.header_offset + 30 + nlen + xlen
            out.append((info.filename, start, info.compress_size, info.compress_type))
    return out


def sha256_file_rate(path: Path) -> tuple[float, str]:
    """(seconds, hex) of read + hashlib.sha256 over a file (page cache), 1 MiB reads."""
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    h = hashlib.sha256()
    t = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return time.perf_counter() - t, h.hexdigest()


def unzstd_sha_rate(path: Path) -> float:
    """Seconds to stream-decompress every zstd member and sha256 every member's content."""
    from backports.zstd import ZstdDecompressor

    ranges = member_data_ranges(path)
    t = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        for _name, start, csize, method in ranges:
            f.seek(start)
            h = hashlib.sha256()
            d = ZstdDecompressor() if method == 93 else None
            left = csize
            while left > 0:
                data = f.read(min(CHUNK, left))
                if not data:
                    break
                left -= len(data)
                h.update(d.decompress(data) if d else data)
            h.hexdigest()
    return time.perf_counter() - t


def file_chunks(path: Path, chunk: int = CHUNK) -> Iterator[bytes]:
    with open(path, "rb", buffering=0) as f:
        while data := f.read(chunk):
            yield data


def cat_seconds(path: Path) -> float:
    """`cat file > /dev/null`, timed around the subprocess (file assumed warm)."""
    t = time.perf_counter()
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True, timeout=120)
    return time.perf_counter() - t


def warm(path: Path) -> None:
    for _ in file_chunks(path, 4 * MiB):
        pass


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_PROCS: list[subprocess.Popen] = []


def start_proc(cmd: list[str], env: dict[str, str] | None, log: Path) -> subprocess.Popen:
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


def stop_proc(p: subprocess.Popen | None, sig: int = signal.SIGTERM) -> None:
    if p is None:
        return
    if p.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, sig)  # our own process group (start_new_session)
        try:
            p.wait(timeout=15)
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


def proc_status(pid: int, key: str) -> int | None:
    """A kB field of /proc/<pid>/status (VmHWM, VmRSS) in bytes."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(rf"^{key}:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) * 1024 if m else None


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
    url: str
    log: Path
    name: str

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        stop_proc(self.proc)


def start_registry(
    data_dir: Path,
    log: Path,
    database_url: str | None = None,
    workers: int | None = None,
) -> Server:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ)
    env = {k: v for k, v in env.items() if not k.startswith("REGISTRY_")}
    env.update(
        REGISTRY_DATA_DIR=str(data_dir),
        REGISTRY_PUBLIC_URL=url,
        REGISTRY_AUTH="off",
        PYTHONUNBUFFERED="1",
    )
    if database_url:
        env["REGISTRY_DATABASE_URL"] = database_url
    cmd = [
        PY, "-m", "uvicorn", "--factory", "registry.app:create_app",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log",
    ]  # fmt: skip
    if workers:
        cmd += ["--workers", str(workers)]
    p = start_proc(cmd, env, log)
    try:
        wait_http(url + "/healthz", 60, p)
    except Exception:
        stop_proc(p)
        raise RuntimeError(f"registry did not start: {tail(log, 800)}") from None
    return Server(p, url, log, "registry")


def start_receiver(work: Path, log: Path) -> Server:
    """bench/recv_app.py on uvicorn: the receive ceiling for the push figure."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, RECV_DIR=str(work))
    cmd = [
        PY, "-m", "uvicorn", "recv_app:app", "--app-dir", str(REPO / "bench"),
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log",
    ]  # fmt: skip
    p = start_proc(cmd, env, log)
    try:
        wait_http(url + "/discard", 30, p)
    except Exception:
        stop_proc(p)
        raise RuntimeError(f"receiver did not start: {tail(log, 800)}") from None
    return Server(p, url, log, "receiver")


def push_plain(client: httpx.Client, url: str, path: Path) -> float:
    """POST a file streamed to a URL; seconds."""
    size = path.stat().st_size
    t = time.perf_counter()
    r = client.post(
        url, content=file_chunks(path), headers={"content-length": str(size)}, timeout=TIMEOUT
    )
    dt = time.perf_counter() - t
    if r.status_code != 200 or int(r.text) != size:
        raise RuntimeError(f"receiver answered {r.status_code}: {r.text[:200]}")
    return dt


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
    p = start_proc([exe, "serve", str(cfg)], dict(os.environ), log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/v2/", 30, p)
    except Exception:
        stop_proc(p)
        raise RuntimeError(f"peer did not start: {tail(log, 800)}") from None
    return Server(p, url, log, "peer")


# --------------------------------------------------------------------------- HTTP clients

TIMEOUT = httpx.Timeout(600.0, connect=10.0)


def settle_writeback() -> None:
    """Flush dirty pages left by the previous measurement before timing the next push.

    The peer does not fsync: without this, the next push's fsyncs (ours or the
    peer's filesystem journal) pay for the previous upload's writeback.
    """
    os.sync()


def push_registry(client: httpx.Client, url: str, path: Path) -> tuple[float, dict[str, Any]]:
    """POST /api/v1/cartons with the file streamed; (seconds, response JSON)."""
    size = path.stat().st_size
    settle_writeback()
    t = time.perf_counter()
    r = client.post(
        url + "/api/v1/cartons",
        content=file_chunks(path),
        headers={"content-length": str(size), "content-type": "application/octet-stream"},
        timeout=TIMEOUT,
    )
    dt = time.perf_counter() - t
    if r.status_code not in (200, 201):
        raise RuntimeError(f"push answered {r.status_code}: {r.text[:300]}")
    return dt, r.json()


PEER_REPO = "bench/cartons"


def push_peer(client: httpx.Client, url: str, path: Path, digest_hex: str) -> float:
    """distribution's upload API: POST uploads/ then one PUT ?digest= with the body streamed."""
    size = path.stat().st_size
    settle_writeback()
    t = time.perf_counter()
    r = client.post(f"{url}/v2/{PEER_REPO}/blobs/uploads/", timeout=TIMEOUT)
    if r.status_code != 202:
        raise RuntimeError(f"peer upload start answered {r.status_code}: {r.text[:200]}")
    loc = r.headers["location"]
    if loc.startswith("/"):
        loc = url + loc
    sep = "&" if "?" in loc else "?"
    r = client.put(
        f"{loc}{sep}digest=sha256:{digest_hex}",
        content=file_chunks(path),
        headers={"content-length": str(size), "content-type": "application/octet-stream"},
        timeout=TIMEOUT,
    )
    dt = time.perf_counter() - t
    if r.status_code != 201:
        raise RuntimeError(f"peer upload PUT answered {r.status_code}: {r.text[:200]}")
    return dt


def peer_blob_url(url: str, digest_hex: str) -> str:
    return f"{url}/v2/{PEER_REPO}/blobs/sha256:{digest_hex}"


def httpx_download(client: httpx.Client, url: str) -> tuple[float, int]:
    """(seconds, bytes) of a streamed GET, body discarded."""
    t = time.perf_counter()
    n = 0
    with client.stream("GET", url, timeout=TIMEOUT, follow_redirects=True) as r:
        if r.status_code != 200:
            r.read()
            raise RuntimeError(f"GET {url} answered {r.status_code}: {r.text[:200]}")
        for chunk in r.iter_raw(CHUNK):
            n += len(chunk)
    return time.perf_counter() - t, n


def curl_download(url: str) -> tuple[float, int]:
    """(seconds, bytes) as curl reports them (-w size_download time_total)."""
    out = subprocess.run(
        ["curl", "-s", "-f", "-L", "-o", "/dev/null", "-w", "%{size_download} %{time_total}", url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if out.returncode != 0:
        raise RuntimeError(f"curl {url} failed (exit {out.returncode}): {out.stderr[:200]}")
    size, seconds = out.stdout.split()
    return float(seconds), int(float(size))


# --------------------------------------------------------------------------- counting proxy


class CountingProxy:
    """A TCP proxy on 127.0.0.1 counting bytes each way (client-agnostic wire accounting)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.up = 0  # client -> server
        self.down = 0  # server -> client
        self.connections = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reset(self) -> None:
        with self._lock:
            self.up = self.down = self.connections = 0

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            client.settimeout(None)
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._pump, args=(client, server, "up"), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, "down"), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, way: str) -> None:
        buf = bytearray(256 * 1024)
        try:
            while True:
                n = src.recv_into(buf)
                if n == 0:
                    break
                dst.sendall(memoryview(buf)[:n])
                with self._lock:
                    if way == "up":
                        self.up += n
                    else:
                        self.down += n
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)
            with contextlib.suppress(OSError):
                src.close() if way == "down" else None

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self.sock.close()
        self._thread.join(timeout=2)


# --------------------------------------------------------------------------- wrk

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60000.0}


def _ms(text: str) -> float:
    m = re.match(r"([\d.]+)(us|ms|s|m)$", text.strip())
    if not m:
        return float("nan")
    return float(m.group(1)) * _UNITS[m.group(2)]


def run_wrk(url: str, seconds: int, method: str, workdir: Path, conns: int = 32) -> dict[str, Any]:
    cmd = ["wrk", "-t2", f"-c{conns}", f"-d{seconds}s", "--latency", "--timeout", "5s"]
    if method != "GET":
        script = workdir / f"wrk-{method.lower()}.lua"
        script.write_text(f'wrk.method = "{method}"\n')
        cmd += ["-s", str(script)]
    out = subprocess.run([*cmd, url], capture_output=True, text=True, timeout=seconds + 60)
    text = out.stdout
    if out.returncode != 0:
        raise RuntimeError(f"wrk failed ({out.returncode}): {out.stderr[:300]}")
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    lat = dict(re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", text, re.M))
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    total = re.search(r"(\d+) requests in", text)
    errors = re.search(r"Socket errors:(.*)", text)
    return {
        "rps": float(rps.group(1)) if rps else float("nan"),
        "p50": _ms(lat.get("50", "nan")),
        "p99": _ms(lat.get("99", "nan")),
        "requests": int(total.group(1)) if total else 0,
        "non2xx": int(non2xx.group(1)) if non2xx else 0,
        "errors": errors.group(1).strip() if errors else "",
    }


# --------------------------------------------------------------------------- machine


def machine_info() -> dict[str, str]:
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = "?"
    with contextlib.suppress(OSError):
        m = re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text())
        if m:
            mem = f"{int(m.group(1)) / 1024 / 1024:.1f} GiB"
    flags = ""
    with contextlib.suppress(OSError):
        text = Path("/proc/cpuinfo").read_text()
        flags = ", ".join(f for f in ("sha_ni", "avx2", "avx512f") if f" {f}" in text)

    def ver(cmd: list[str]) -> str:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
            return (out.stdout or out.stderr).strip().splitlines()[0]
        except Exception:
            return "not installed"

    import importlib.metadata as md

    def pkg(name: str) -> str:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            return "not installed"

    return {
        "nproc": str(os.cpu_count()),
        "CPU": cpu + (f" ({flags})" if flags else ""),
        "memory": mem,
        "kernel": os.uname().release,
        "python": sys.version.split()[0],
        "server": (
            f"uvicorn {pkg('uvicorn')} (httptools {pkg('httptools')}, uvloop {pkg('uvloop')}), "
            f"litestar {pkg('litestar')}"
        ),
        "peer": ver(["docker-registry", "--version"]),
        "wrk": ver(["wrk", "--version"]).split(" Copyright")[0],
        "curl": ver(["curl", "--version"]).split(" (")[0],
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def run_hey(url: str, seconds: int, method: str, conns: int = 32) -> dict[str, Any]:
    """`hey` (Debian) for HEAD: Debian's wrk 4.1 waits for a HEAD response's body and stalls."""
    cmd = ["hey", "-z", f"{seconds}s", "-c", str(conns), "-m", method, "-t", "5", url]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
    text = out.stdout
    if out.returncode != 0:
        raise RuntimeError(f"hey failed ({out.returncode}): {out.stderr[:300]}")
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    lat = dict(re.findall(r"^\s+(\d+)% in ([\d.]+) secs", text, re.M))
    codes = re.findall(r"\[(\d+)\]\s+(\d+) responses", text)
    total = sum(int(n) for _, n in codes)
    bad = sum(int(n) for c, n in codes if not c.startswith(("2", "3")))
    errors = re.search(r"Error distribution:(.*)", text, re.S)
    return {
        "rps": float(rps.group(1)) if rps else float("nan"),
        "p50": float(lat.get("50", "nan")) * 1000,
        "p99": float(lat.get("99", "nan")) * 1000,
        "requests": total,
        "non2xx": bad,
        "errors": errors.group(1).strip()[:200] if errors else "",
    }


def write_fsync_rate(directory: Path, size: int) -> float:
    """Seconds to write ``size`` bytes (from memory) to a new file and fsync it."""
    data = pool()[: 4 * MiB]
    path = directory / "fsync-probe.bin"
    t = time.perf_counter()
    with open(path, "wb", buffering=0) as f:
        left = size
        while left > 0:
            n = f.write(data[: min(len(data), left)])
            left -= n
        os.fsync(f.fileno())
    dt = time.perf_counter() - t
    path.unlink()
    return dt


def sha256_mem_rate(size: int) -> float:
    """Seconds for hashlib.sha256 over ``size`` bytes already in memory (1 MiB updates)."""
    view = memoryview(pool())
    h = hashlib.sha256()
    t = time.perf_counter()
    done = 0
    while done < size:
        off = done % (POOL_SIZE - MiB)
        h.update(view[off : off + MiB])
        done += MiB
    return time.perf_counter() - t
