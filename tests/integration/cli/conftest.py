"""Helpers for driving the CLI in-process against a live server (``cli``: tests.cli_runner)."""

from __future__ import annotations

import hashlib
import io
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from registry.carton.manifest import MANIFEST_NAME
from registry.carton.zipread import CartonArchive, sha256_member
from tests.cli_runner import cli  # noqa: F401


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
