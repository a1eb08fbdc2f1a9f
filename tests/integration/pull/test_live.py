"""The carton loader's access pattern against a real server (uvicorn on 127.0.0.1)."""

from __future__ import annotations

import io
import zipfile

import httpx
import pytest

from registry.carton.links import parse_links
from tests.conftest import fixture_carton
from tests.integration.pull.helpers import make_carton, sha256

TAIL = 67584  # the loader reads the last 66 KiB first


def loader_client(base_url: str) -> httpx.Client:
    """Like the loader's reqwest client: no Accept-Encoding, follows redirects."""
    client = httpx.Client(base_url=base_url, follow_redirects=True, timeout=30)
    del client.headers["accept-encoding"]
    return client


@pytest.mark.settings(slim_inline_max_bytes=16)
def test_loader_access_pattern(live_server):
    big = bytes(range(256)) * 600  # 150 KiB, linked from the slim carton
    data = make_carton({"model/weights.bin": big, "model/tiny.txt": b"tiny\n"}, model_name="live")
    with loader_client(live_server.url) as http:
        pushed = http.post("/api/v1/cartons", content=data)
        assert pushed.status_code == 201, pushed.text
        manifest_sha = pushed.json()["manifest_sha256"]
        http.post("/api/v1/cartons", content=fixture_carton("02").read_bytes())

        for url in (f"/cartons/{manifest_sha}.carton", "/models/live/versions/1.carton"):
            head = http.head(url)
            assert head.status_code == 200
            size = int(head.headers["content-length"])
            assert head.headers["accept-ranges"] == "bytes"
            tail = http.get(url, headers={"Range": f"bytes=-{TAIL}"})
            assert tail.status_code == 206
            whole = http.get(url).content
            assert len(whole) == size
            assert tail.content == whole[-TAIL:]
            # ...then the rest by Range requests.
            parts = [
                http.get(url, headers={"Range": f"bytes={i}-{min(i + 999, size - 1)}"}).content
                for i in range(0, size, 1000)
            ]
            assert b"".join(parts) == whole

        with zipfile.ZipFile(io.BytesIO(whole)) as z:
            assert sha256(z.read("MANIFEST")) == manifest_sha
            links = parse_links(z.read("LINKS"))
        assert sha256(big) in links
        for digest, urls in links.items():
            assert urls[0] == f"{live_server.url}/blobs/{digest}"
            head = httpx.head(urls[0])  # absolute URL, as the loader uses it
            assert head.status_code == 200
            length = int(head.headers["content-length"])
            got = http.get(urls[0])
            assert got.status_code == 200
            assert "content-encoding" not in got.headers
            assert len(got.content) == length
            assert sha256(got.content) == digest


def test_compressed_blob_over_real_http(live_server):
    text = b"compressible line of text\n" * 5000
    with httpx.Client(base_url=live_server.url, timeout=30) as http:
        r = http.post("/api/v1/cartons", content=make_carton({"model/t.txt": text}))
        assert r.status_code == 201
        for coding in ("gzip", "br", "zstd", "deflate"):
            got = http.get(f"/blobs/{sha256(text)}", headers={"Accept-Encoding": coding})
            assert got.headers["content-encoding"] == coding
            assert got.content == text  # httpx decodes every one of them
