"""The real carton loader (``cartonml``) with a private model's slim carton: it fetches the
signed LINKS URLs with no token, and fails once they have expired or were altered.

``get_model_info`` reads carton.toml, MANIFEST and tensor_data/index.toml eagerly (no
runner needed); a misc file's ``read()`` and a self-test tensor's ``get()`` fetch the
file, through LINKS when the slim carton left it out (``assert_refused`` says how). The
tests run on both backend pairs; the expiry is reached by moving the clock the server
checks signatures with, never by waiting. The loader runs in a child process
(``LOADER``): a failed fetch panics one of its Rust runtime's threads, and its runtime can
crash the interpreter at exit, so each run is a fresh process that prints one JSON line
and leaves without tearing the runtime down.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import numpy as np
import pytest

from registry.carton.links import parse_links, write_links
from registry.carton.pack import pack_folder
from registry.carton.paths import LINKS_NAME
from registry.client import RegistryClient, push_carton
from registry.services import signing
from registry.services.auth import create_token
from tests.helpers import sha

# AUTH=all: nothing is readable without a token, except through a signed blob URL.
pytestmark = pytest.mark.settings(auth="all", signed_url_ttl=3600.0)

TOML = """spec_version = 1
model_name = "secret_model"

[[input]]
name = "x"
dtype = "float32"
shape = [128, 256]

[[output]]
name = "x"
dtype = "float32"
shape = [128, 256]

[[self_test]]
[self_test.inputs]
x = "@tensor_data/_tensor_0"

[runner]
runner_name = "noop"
required_framework_version = "=1.0.0"
runner_compat_version = 1
"""
INDEX = """[[tensor]]
name = "_tensor_0"
dtype = "float32"
shape = [128, 256]
file = "tensor_0.bin"
inner = []
"""
CARD = bytes(range(256)) * 800  # 200 KiB misc file: linked
NOTES = b"# acme's model\n"  # small misc file: inline
TENSOR = np.arange(128 * 256, dtype=np.float32).reshape(128, 256)  # 128 KiB: linked

# Reads every misc file and every self-test input tensor, writes their bytes to the out
# dir, prints {"model_name", "read": {name: "ok" | error}}; os._exit skips the teardown.
# Before each item it writes "@@ <name>" to stderr, where the runtime's panics go.
LOADER = r"""
import asyncio, json, os, sys
import cartonml

async def main(carton, out):
    info = await cartonml.get_model_info(carton)
    read = {}
    items = [("misc/" + n, f.read) for n, f in info.misc_files.items()]
    for test in info.self_tests:
        items += [("tensor/" + n, t.get) for n, t in test.inputs.items()]
    for name, fetch in items:
        print("@@ " + name, file=sys.stderr, flush=True)  # splits stderr (panics) by item
        try:
            value = await fetch()
        except BaseException as e:
            read[name] = f"{type(e).__name__}: {e}"
            continue
        data = value if isinstance(value, bytes) else value.tobytes()
        with open(os.path.join(out, name.replace("/", "_")), "wb") as f:
            f.write(data)
        read[name] = "ok"
    return {"model_name": info.model_name, "read": read}

result = asyncio.run(main(sys.argv[1], sys.argv[2]))
print(json.dumps(result), flush=True)
os._exit(0)
"""


def build_carton(folder: Path) -> Path:
    for rel, data in {
        "carton.toml": TOML.encode(),
        "tensor_data/index.toml": INDEX.encode(),
        "tensor_data/tensor_0.bin": TENSOR.tobytes(),
        "misc/card.bin": CARD,
        "misc/notes.md": NOTES,
        "model/model.txt": b"noop\n",
    }.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    path = folder.parent / "secret_model.carton"
    with path.open("wb") as out:
        pack_folder(folder, out)
    return path


class Loaded:
    """What one loader run read (``files``: name -> bytes) and what it said on stderr
    while reading each item (``said``: name -> text)."""

    def __init__(self, result: dict[str, Any], out: Path, stderr: str) -> None:
        self.model_name: str = result["model_name"]
        self.read: dict[str, str] = result["read"]
        self.files = {p.name: p.read_bytes() for p in out.iterdir()}
        self.said = dict(part.partition("\n")[::2] for part in stderr.split("@@ ")[1:])

    def failed(self, name: str) -> str:
        """What the loader said reading ``name``, which it must have failed to read."""
        assert self.read[name] == "RustPanic: rust future panicked", self.read[name]
        assert name.replace("/", "_") not in self.files
        return self.said[name]


def run_loader(carton: Path, work: Path) -> Loaded:
    """Open ``carton`` with cartonml in a child process (no token: the loader has none)."""
    out = work / f"out-{len(list(work.glob('out-*')))}"
    out.mkdir()
    env = {
        **os.environ,
        "CARTON_CACHE_DIR": str(out.with_suffix(".cache")),
        "CARTON_RUNNER_DIR": str(work / "runners"),
        "CARTON_RUNNER_DATA_DIR": str(work / "runner_data"),
        "RUST_BACKTRACE": "0",
    }
    proc = subprocess.run(
        [sys.executable, "-c", LOADER, str(carton), str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return Loaded(json.loads(proc.stdout.splitlines()[-1]), out, proc.stderr)


def rewrite_links(slim: Path, dest: Path, change: Any) -> Path:
    """A copy of ``slim`` whose LINKS has every URL passed through ``change``; every other
    member keeps its name, order, bytes and compression."""
    with zipfile.ZipFile(slim) as src, zipfile.ZipFile(dest, "w") as out:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == LINKS_NAME:
                links = parse_links(data)
                data = write_links({k: [change(u) for u in urls] for k, urls in links.items()})
            out.writestr(info, data)
    return dest


class Pulled:
    """A private model pushed to a live registry and its slim carton, pulled with a token."""

    def __init__(self, slim: Path, links: dict[str, list[str]], work: Path) -> None:
        self.slim, self.links, self.work = slim, links, work
        self.card_url = links[sha(CARD)][0]
        self.expires = int(parse_qs(urlsplit(self.card_url).query)["expires"][0])

    def load(self, carton: Path | None = None) -> Loaded:
        return run_loader(carton or self.slim, self.work)


@pytest.fixture
def pulled(live_server, tmp_path: Path) -> Pulled:
    ctx = live_server.ctx
    admin = create_token(ctx, None, "admin")[0]
    with RegistryClient(live_server.url, admin) as c:
        c.request("PUT", "/api/v1/namespaces/acme", json={"visibility": "private"})
    push = create_token(ctx, None, "push", ["acme"])[0]
    pull = create_token(ctx, None, "pull", ["acme"])[0]
    with RegistryClient(live_server.url, push) as c:
        pushed = push_carton(c, build_carton(tmp_path / "folder"), namespace="acme")
    assert pushed.response["model_name"] == "acme/secret_model"
    url = f"{live_server.url}/cartons/{pushed.response['manifest_sha256']}.carton"
    assert httpx.get(url).status_code == 401  # the carton itself needs the token
    r = httpx.get(url, headers={"Authorization": f"Bearer {pull}"})
    assert r.status_code == 200, r.text
    with zipfile.ZipFile(io.BytesIO(r.content)) as z:
        links = parse_links(z.read(LINKS_NAME))
        inline = set(z.namelist())
    # the two big files are linked (over the slim threshold), the notes stay inline
    threshold = ctx.settings.slim_inline_max_bytes
    assert len(NOTES) <= threshold < min(len(CARD), TENSOR.nbytes)
    assert set(links) == {sha(CARD), sha(TENSOR.tobytes())}
    assert "misc/notes.md" in inline and "misc/card.bin" not in inline
    for urls in links.values():
        assert urls[0].startswith(f"{live_server.url}/blobs/") and "sig=" in urls[0]
    slim = tmp_path / "slim.carton"
    slim.write_bytes(r.content)
    work = tmp_path / "loader"
    work.mkdir()
    return Pulled(slim, links, work)


def assert_read_everything(loaded: Loaded) -> None:
    assert loaded.model_name == "secret_model"
    assert loaded.read == {"misc/card.bin": "ok", "misc/notes.md": "ok", "tensor/x": "ok"}
    assert loaded.files["misc_card.bin"] == CARD
    assert loaded.files["misc_notes.md"] == NOTES
    assert loaded.files["tensor_x"] == TENSOR.tobytes()


def assert_refused(loaded: Loaded, card_url: str, status: str) -> None:
    """Model info and the inline file still load; both linked files fail.

    A misc file is fetched with HEAD then GET, and a GET answered with an error status
    panics with that status. A tensor is fetched with a GET alone, whose status this
    wheel does not check: it takes the error body as the tensor's bytes, and fails only
    because that body is shorter than the tensor (a linked tensor is over the slim
    threshold, 64 KiB by default; an error body is a few hundred bytes)."""
    assert loaded.model_name == "secret_model"
    assert loaded.read["misc/notes.md"] == "ok"
    said = loaded.failed("misc/card.bin")
    assert f"panicked at 'Error fetching URL {card_url}: {status}'" in said, said
    said = loaded.failed("tensor/x")
    assert "ShapeError/OutOfBounds: out of bounds indexing" in said, said


def test_loader_reads_linked_files_through_signed_urls(pulled: Pulled) -> None:
    assert_read_everything(pulled.load())


def test_loader_fails_once_the_urls_expire(pulled: Pulled, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's clock (signature checks only) moved to the expiry: still valid; one
    second past it: the same carton's URLs are refused."""
    assert time.time() < pulled.expires <= time.time() + 3600  # the TTL setting
    monkeypatch.setattr(signing, "time", SimpleNamespace(time=lambda: float(pulled.expires)))
    assert_read_everything(pulled.load())
    monkeypatch.setattr(signing, "time", SimpleNamespace(time=lambda: pulled.expires + 1.0))
    assert_refused(pulled.load(), pulled.card_url, "404 Not Found")


def flip_sig(url: str) -> str:
    base, _, sig = url.rpartition("sig=")
    return f"{base}sig={sig[:-1]}{'0' if sig[-1] != '0' else '1'}"


def extend_expiry(url: str) -> str:
    q = parse_qs(urlsplit(url).query)
    old = f"expires={q['expires'][0]}"
    return url.replace(old, f"expires={int(q['expires'][0]) + 86400}")


def test_loader_fails_when_links_are_altered(pulled: Pulled) -> None:
    same = rewrite_links(pulled.slim, pulled.work / "same.carton", lambda u: u)
    assert_read_everything(pulled.load(same))  # the rewriting alone breaks nothing
    for change, status in (
        (flip_sig, "404 Not Found"),
        (extend_expiry, "404 Not Found"),
        (lambda u: u.partition("?")[0], "401 Unauthorized"),  # unsigned: AUTH=all wants a token
    ):
        carton = rewrite_links(pulled.slim, pulled.work / "altered.carton", change)
        loaded = pulled.load(carton)
        assert_refused(loaded, change(pulled.card_url), status)


@pytest.mark.settings(
    auth="all", signed_url_ttl=3600.0, s3_presign_downloads=True, chunk_min_file_bytes=1 << 30
)
def test_loader_follows_a_signed_url_to_its_presigned_redirect(
    pulled: Pulled, backend: str
) -> None:
    """With S3 presigning on (and files stored whole: a chunked file is no S3 object), a
    signed URL's GET is a 307 to S3, its HEAD is answered by the registry (S3 refuses HEAD
    on a URL presigned for GET): the loader follows it and reads every byte."""
    got = httpx.get(pulled.card_url)
    if backend == "postgres-s3":
        assert got.status_code == 307 and "X-Amz-Signature" in got.headers["location"]
    else:  # a folder store has no URL to send the client to
        assert got.status_code == 200 and got.content == CARD
    assert_read_everything(pulled.load())
