"""HTTP clients for the figures: push and pull against the registry, the peer and the receiver.

Every body is streamed from the file in 1 MiB chunks; every call returns the wall
time it measured, so the figures only divide.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from bench.harness import CHUNK
from bench.harness.data import file_chunks

TIMEOUT = httpx.Timeout(600.0, connect=10.0)
PEER_REPO = "bench/cartons"


def settle_writeback() -> None:
    """Flush dirty pages left by the previous measurement before timing the next push.

    The peer does not fsync: without this, the next push's fsyncs (ours or the
    peer's filesystem journal) pay for the previous upload's writeback.
    """
    os.sync()


def _upload(client: httpx.Client, method: str, url: str, path: Path) -> httpx.Response:
    """One request whose body is the file, streamed with its length declared."""
    return client.request(
        method,
        url,
        content=file_chunks(path),
        headers={
            "content-length": str(path.stat().st_size),
            "content-type": "application/octet-stream",
        },
        timeout=TIMEOUT,
    )


def push_plain(client: httpx.Client, url: str, path: Path) -> float:
    """POST a file streamed to the receiver; seconds."""
    t = time.perf_counter()
    r = _upload(client, "POST", url, path)
    dt = time.perf_counter() - t
    if r.status_code != 200 or int(r.text) != path.stat().st_size:
        raise RuntimeError(f"receiver answered {r.status_code}: {r.text[:200]}")
    return dt


def push_registry(client: httpx.Client, url: str, path: Path) -> tuple[float, dict[str, Any]]:
    """POST /api/v1/cartons with the file streamed; (seconds, response JSON)."""
    settle_writeback()
    t = time.perf_counter()
    r = _upload(client, "POST", url + "/api/v1/cartons", path)
    dt = time.perf_counter() - t
    if r.status_code not in (200, 201):
        raise RuntimeError(f"push answered {r.status_code}: {r.text[:300]}")
    return dt, r.json()


def push_peer(client: httpx.Client, url: str, path: Path, digest_hex: str) -> float:
    """distribution's upload API: POST uploads/ then one PUT ?digest= with the body streamed."""
    settle_writeback()
    t = time.perf_counter()
    r = client.post(f"{url}/v2/{PEER_REPO}/blobs/uploads/", timeout=TIMEOUT)
    if r.status_code != 202:
        raise RuntimeError(f"peer upload start answered {r.status_code}: {r.text[:200]}")
    loc = r.headers["location"]
    if loc.startswith("/"):
        loc = url + loc
    sep = "&" if "?" in loc else "?"
    r = _upload(client, "PUT", f"{loc}{sep}digest=sha256:{digest_hex}", path)
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


def unavailable(client: httpx.Client, method: str, url: str) -> str | None:
    """None when ``method url`` answers 200, else why not (a figure reports it and goes on)."""
    path = httpx.URL(url).raw_path.decode()[:60]
    try:
        r = client.request(method, url, timeout=10)
        if r.status_code == 200:
            return None
        if method == "HEAD":  # no body to quote: GET one byte for the server's reason
            r2 = client.get(url, timeout=10, headers={"range": "bytes=0-0"})
            return f"HEAD {path} answered {r.status_code}; GET answered {r2.status_code} {r2.text[:120]!r}"
        return f"{method} {path} answered {r.status_code} {r.text[:120]!r}"
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"


class CliFailed(RuntimeError):
    """A `carton-registry` command exited non-zero (the message ends with its output)."""


def cli_run(exe: Path, args: list[str], env: dict[str, str]) -> tuple[float, str]:
    """(seconds, stdout) of one `carton-registry` command run as a user runs it."""
    t = time.perf_counter()
    out = subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=TIMEOUT.read, env=env
    )
    dt = time.perf_counter() - t
    if out.returncode != 0:
        raise CliFailed(
            f"`carton-registry {args[0]}` exited {out.returncode}: "
            f"{(out.stderr or out.stdout)[-300:]!r}"
        )
    return dt, out.stdout
