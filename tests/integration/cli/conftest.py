"""Helpers for driving the CLI against a live server: in-process (``cli``: tests.cli_runner),
or as a user does (``installed``: the installed ``carton-registry`` script in a subprocess,
from a folder outside the checkout).
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from registry.carton.links import write_links
from registry.carton.manifest import MANIFEST_NAME
from registry.carton.zipread import CartonArchive, sha256_member
from registry.carton.zipwrite import STORED, write_zip
from registry.client import sender as client_sender
from tests.cli_runner import cli  # noqa: F401
from tests.conftest import REPO_ROOT

INSTALLED = Path(sys.executable).with_name("carton-registry")


@pytest.fixture
def as_chunks(monkeypatch):
    """Large files go as the chunks the registry lacks even when it holds none of them
    (its probe finds nothing), as a fine-tune's do: for the tests of that path."""
    monkeypatch.setattr(client_sender, "probe_names", lambda *args: [])


def manifest_hash(path: Path) -> str:
    with CartonArchive.open(path) as archive:
        return archive.manifest_sha256


def member_bytes(path: Path) -> dict[str, bytes]:
    """Every MANIFEST path present in the zip -> its bytes (small cartons only)."""
    with CartonArchive.open(path) as archive:
        return {p: archive.read_bytes(p, 1 << 30) for p in archive.present_paths()}


def assert_full_and_valid(path: Path, expected_manifest: str) -> None:
    """Every MANIFEST file inline and hashing right, no LINKS, members named as MANIFEST."""
    with CartonArchive.open(path) as archive:
        assert archive.manifest_sha256 == expected_manifest
        assert archive.links is None
        assert archive.missing_paths() == []
        assert MANIFEST_NAME in archive.members
        for entry in archive.manifest:
            digest, _ = sha256_member(archive, entry.path)
            assert digest == entry.sha256, entry.path


def relinked(src: Path, dest: Path, urls_for) -> set[str]:  # type: ignore[no-untyped-def]
    """A copy of slim carton ``src`` whose LINKS map each linked sha256 to ``urls_for(sha)``."""
    with CartonArchive.open(src) as archive:
        linked = {e.sha256 for e in archive.manifest if e.path not in archive.members}
        links = write_links({sha: urls_for(sha) for sha in sorted(linked)})
        members = [(MANIFEST_NAME, lambda: io.BytesIO(archive.manifest.raw), STORED)]
        members += [
            (p, lambda p=p: io.BytesIO(archive.read_bytes(p, 1 << 30)), STORED)
            for p in archive.present_paths()
        ]
        members.append(("LINKS", lambda: io.BytesIO(links), STORED))
        with open(dest, "wb") as f:
            write_zip(f, members)
    return linked


class StaticServer:
    """Serves ``routes`` (URL path -> bytes) on 127.0.0.1; counts requests per path."""

    def __init__(self, routes: dict[str, bytes]) -> None:
        self.routes = routes
        self.hits: dict[str, int] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.hits[self.path] = server.hits.get(self.path, 0) + 1
                body = server.routes.get(self.path)
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def static_server() -> Iterator[StaticServer]:
    server = StaticServer({})
    try:
        yield server
    finally:
        server.close()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def zip_bytes(members: dict[str, bytes]) -> bytes:
    """A Stored zip of the given members, in order (stdlib zipfile)."""
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out.getvalue()


CARTON_TOML = """spec_version = 1
model_name = "{name}"

[runner]
runner_name = "noop"
required_framework_version = "=1.0.0"
"""


def make_carton(path: Path, name: str, files: dict[str, bytes]) -> Path:
    """A valid Stored carton named ``name`` holding ``files`` (plus carton.toml and index)."""
    members = {
        "carton.toml": CARTON_TOML.format(name=name).encode(),
        "tensor_data/index.toml": b"tensor = []\n",
        **files,
    }
    manifest = "".join(
        f"{p}={sha256_hex(members[p])}\n" for p in sorted(members, key=lambda p: p.encode())
    ).encode()
    path.write_bytes(zip_bytes({**members, "MANIFEST": manifest}))
    return path


# --- the installed script, as a user runs it ------------------------------------------------


def assert_no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert "Exception ignored" not in stderr, stderr


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def last_line(self) -> str:
        lines = self.out.strip().splitlines()
        return lines[-1] if lines else ""

    @property
    def error(self) -> str:
        """stderr, which must be exactly one ``error:`` line."""
        lines = self.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), self.err
        return lines[0]


class InstalledCli:
    """``carton-registry`` from the venv's bin folder, run from ``work/`` under a temp folder.

    The environment has no ``REGISTRY_*`` variables and its own HOME, config and cache folders, so
    nothing of the machine's (or the checkout's ``./data``) leaks in; every run is checked
    for tracebacks.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cwd = root / "work"
        self.cwd.mkdir()
        (root / "home").mkdir()
        self.config = root / "config"
        self.cache = root / "cache"
        assert REPO_ROOT not in self.cwd.resolve().parents
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith(("REGISTRY_", "PYTHON"))
        }
        self.env.update(
            HOME=str(root / "home"),
            XDG_CONFIG_HOME=str(self.config),
            XDG_CACHE_HOME=str(self.cache),
        )

    def command(self, args: tuple[str, ...]) -> list[str]:
        return [str(INSTALLED), *args]

    def __call__(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        input: str | None = None,
        timeout: float = 120,
        **kwargs: Any,
    ) -> Result:
        proc = subprocess.run(
            self.command(args),
            cwd=self.cwd,
            env={**self.env, **(env or {})},
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            timeout=timeout,
            **kwargs,
        )
        assert_no_traceback(proc.stderr)
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def start(self, *args: str, **kwargs: Any) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(args),
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **kwargs,
        )


@pytest.fixture
def installed(tmp_path: Path) -> InstalledCli:
    if not INSTALLED.is_file():
        pytest.fail(f"{INSTALLED} is missing: pip install -e . into this venv")
    return InstalledCli(tmp_path)


class DripServer:
    """Answers every GET with a huge Content-Length and then a trickle of bytes: a transfer
    that stays in progress until the client goes away."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(1 << 40))
                self.end_headers()
                try:
                    while True:
                        self.wfile.write(b"\0" * 65536)
                        time.sleep(0.02)
                except OSError:  # the client left
                    return

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def drip_server() -> Iterator[DripServer]:
    server = DripServer()
    try:
        yield server
    finally:
        server.close()
