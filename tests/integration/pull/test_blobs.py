"""GET/HEAD /blobs/{sha256}: the LINKS target (Range, ETag, encodings, presigned redirects)."""

from __future__ import annotations

import gzip
import os
import zlib

import brotli
import httpx
import pytest
import zstandard

from tests.integration.pull.helpers import make_carton, push, sha256

TEXT = b"".join(
    f"line {i}: the quick brown fox jumps over the lazy dog {i % 97}\n".encode()
    for i in range(4000)
)  # about 240 KiB of compressible text
RANDOM = os.urandom(100 * 1024)
SMALL = b"a small file that is not worth compressing\n" * 10
DECODERS = {
    "zstd": lambda raw: zstandard.ZstdDecompressor().decompressobj().decompress(raw),
    "br": brotli.decompress,
    "gzip": gzip.decompress,
    "deflate": zlib.decompress,
}
IMMUTABLE = "public, max-age=31536000, immutable"


@pytest.fixture
def blobs(client) -> dict[str, bytes]:
    files = {"model/text.txt": TEXT, "model/random.bin": RANDOM, "model/small.txt": SMALL}
    push(client, make_carton(files))
    return {
        name: sha256(data)
        for name, data in {"text": TEXT, "random": RANDOM, "small": SMALL}.items()
    }


def raw_get(client, url: str, headers: dict[str, str] | None = None, drop_accept_encoding=False):
    """(response, raw body bytes as sent on the wire, not decoded by httpx)."""
    request = client.build_request("GET", url, headers=headers or {})
    if drop_accept_encoding:
        del request.headers["accept-encoding"]
    response = client.send(request, stream=True)
    try:
        raw = b"".join(response.iter_raw())
    finally:
        response.close()
    return response, raw


def assert_blob_headers(response, digest: str) -> None:
    assert response.headers["etag"] == f'"{digest}"'
    assert response.headers["cache-control"] == IMMUTABLE
    assert response.headers["accept-ranges"] == "bytes"
    assert response.headers["vary"] == "Accept-Encoding"


def test_head(client, blobs):
    for data in (TEXT, RANDOM, SMALL):
        digest = sha256(data)
        r = client.head(f"/blobs/{digest}")
        assert r.status_code == 200
        assert r.content == b""
        assert int(r.headers["content-length"]) == len(data)
        assert "content-encoding" not in r.headers
        assert_blob_headers(r, digest)
        # HEAD always describes the identity bytes, whatever Accept-Encoding says.
        r = client.head(f"/blobs/{digest}", headers={"Accept-Encoding": "zstd, gzip"})
        assert int(r.headers["content-length"]) == len(data)


def test_identity_by_default(client, blobs):
    digest = blobs["text"]
    r, raw = raw_get(client, f"/blobs/{digest}", drop_accept_encoding=True)
    assert r.status_code == 200
    assert "content-encoding" not in r.headers
    assert int(r.headers["content-length"]) == len(raw) == len(TEXT)
    assert sha256(raw) == digest
    assert_blob_headers(r, digest)
    for header in (
        "identity",
        "gzip;q=0, identity",
        "gzip;q=0",
        "br;q=0.5, identity",
        "*;q=0, identity",
        "unknown-coding",
    ):
        r, raw = raw_get(client, f"/blobs/{digest}", {"Accept-Encoding": header})
        assert r.status_code == 200, header
        assert "content-encoding" not in r.headers, header
        assert sha256(raw) == digest
        assert r.headers["vary"] == "Accept-Encoding"


@pytest.mark.parametrize("coding", ["identity", "zstd", "br", "gzip", "deflate"])
def test_each_encoding_decodes_to_the_blob(client, blobs, coding):
    digest = blobs["text"]
    r, raw = raw_get(client, f"/blobs/{digest}", {"Accept-Encoding": coding})
    assert r.status_code == 200
    assert_blob_headers(r, digest)
    if coding == "identity":
        assert "content-encoding" not in r.headers
        data = raw
    else:
        assert r.headers["content-encoding"] == coding
        assert "content-length" not in r.headers
        assert len(raw) < len(TEXT) // 2
        data = DECODERS[coding](raw)
    assert sha256(data) == digest


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("gzip, deflate, br, zstd", "zstd"),
        ("gzip, deflate, br", "br"),
        ("deflate, gzip", "gzip"),
        ("gzip;q=0.5, zstd;q=0.8", "zstd"),
        ("gzip, zstd;q=0.1", "gzip"),
        ("zstd;q=0, br;q=0.2, *;q=0.1", "br"),
        ("*", "zstd"),
        ("GZIP", "gzip"),
        ("identity;q=0.1, deflate", "deflate"),
    ],
)
def test_encoding_negotiation(client, blobs, header, expected):
    r, raw = raw_get(client, f"/blobs/{blobs['text']}", {"Accept-Encoding": header})
    assert r.headers.get("content-encoding") == expected, header
    assert sha256(DECODERS[expected](raw)) == blobs["text"]


def test_not_worth_compressing_is_identity(client, blobs):
    for name, data in (("random", RANDOM), ("small", SMALL)):
        r, raw = raw_get(client, f"/blobs/{blobs[name]}", {"Accept-Encoding": "zstd, gzip"})
        assert "content-encoding" not in r.headers, name
        assert int(r.headers["content-length"]) == len(data)
        assert raw == data


def test_ranges(client, blobs):
    digest = blobs["text"]
    url = f"/blobs/{digest}"
    size = len(TEXT)
    r, raw = raw_get(client, url, {"Range": "bytes=10-19", "Accept-Encoding": "gzip, zstd"})
    assert r.status_code == 206
    assert "content-encoding" not in r.headers  # a Range is answered in identity
    assert raw == TEXT[10:20]
    assert r.headers["content-range"] == f"bytes 10-19/{size}"
    assert r.headers["content-length"] == "10"
    assert_blob_headers(r, digest)

    r, raw = raw_get(client, url, {"Range": "bytes=-67584"})
    assert r.status_code == 206 and raw == TEXT[-67584:]
    assert r.headers["content-range"] == f"bytes {size - 67584}-{size - 1}/{size}"
    r, raw = raw_get(client, url, {"Range": f"bytes={size - 5}-"})
    assert r.status_code == 206 and raw == TEXT[-5:]
    r, raw = raw_get(client, url, {"Range": f"bytes=-{size * 2}"})
    assert r.status_code == 206 and raw == TEXT

    step = 50_000
    parts = [
        raw_get(client, url, {"Range": f"bytes={i}-{i + step - 1}"})[1]
        for i in range(0, size, step)
    ]
    assert b"".join(parts) == TEXT

    for spec in (f"bytes={size}-", "bytes=-0"):
        r = client.get(url, headers={"Range": spec})
        assert r.status_code == 416, spec
        assert r.headers["content-range"] == f"bytes */{size}"
        assert "error" in r.json()
        assert r.headers["vary"] == "Accept-Encoding"

    r, raw = raw_get(client, url, {"Range": "bytes=0-1,4-5", "Accept-Encoding": "gzip"})
    assert r.status_code == 200 and raw == TEXT and "content-encoding" not in r.headers


def test_if_none_match(client, blobs):
    digest = blobs["text"]
    url = f"/blobs/{digest}"
    for value in (f'"{digest}"', f'W/"{digest}"', f'"x", "{digest}"', "*"):
        r = client.get(url, headers={"If-None-Match": value})
        assert r.status_code == 304, value
        assert r.content == b""
        assert_blob_headers(r, digest)
        assert client.head(url, headers={"If-None-Match": value}).status_code == 304
    assert client.get(url, headers={"If-None-Match": '"other"'}).status_code == 200


def test_errors(client, blobs):
    digest = blobs["text"]
    for bad in ("abc", digest.upper(), digest[:-1] + "z", digest + "0"):
        r = client.get(f"/blobs/{bad}")
        assert r.status_code == 400, bad
        assert "error" in r.json()
        assert client.head(f"/blobs/{bad}").status_code == 400
    unknown = "1" * 64
    r = client.get(f"/blobs/{unknown}")
    assert r.status_code == 404 and "error" in r.json()
    assert client.head(f"/blobs/{unknown}").status_code == 404


def test_empty_blob(client):
    empty = sha256(b"")
    assert client.put(f"/api/v1/blobs/{empty}", content=b"").status_code in (200, 201)
    r = client.head(f"/blobs/{empty}")
    assert r.status_code == 200 and r.headers["content-length"] == "0"
    r, raw = raw_get(client, f"/blobs/{empty}", {"Accept-Encoding": "gzip"})
    assert r.status_code == 200 and raw == b"" and r.headers["content-length"] == "0"
    r = client.get(f"/blobs/{empty}", headers={"Range": "bytes=0-"})
    assert r.status_code == 416 and r.headers["content-range"] == "bytes */0"


@pytest.mark.settings(s3_presign_downloads=True, chunk_min_file_bytes=1 << 30)
def test_presigned_redirect_for_get_never_for_head(client, registry_ctx, blobs, backend):
    """A file stored whole is one object: GET may go to the store directly."""
    digest = blobs["text"]
    url = f"/blobs/{digest}"
    head = client.head(url, follow_redirects=False)
    assert head.status_code == 200
    assert int(head.headers["content-length"]) == len(TEXT)
    assert "location" not in head.headers
    r = client.get(url, follow_redirects=False, headers={"Accept-Encoding": "identity"})
    if backend == "sqlite-fs":  # the filesystem store cannot presign: the bytes come here
        assert r.status_code == 200 and r.content == TEXT
        return
    assert r.status_code == 307
    location = r.headers["location"]
    assert location.startswith("http") and digest in location
    assert client.get(url, headers={"If-None-Match": f'"{digest}"'}).status_code == 304
    direct = httpx.get(location, headers={"Accept-Encoding": "identity"})
    assert direct.status_code == 200
    assert sha256(direct.content) == digest


@pytest.mark.settings(s3_presign_downloads=True)
def test_chunked_files_are_streamed_by_the_registry_even_with_presigning(client, blobs):
    """A chunked file lives in packs: no single object to presign, so no redirect."""
    digest = blobs["text"]
    assert len(TEXT) > 64 * 1024  # chunked at the default threshold
    r = client.get(
        f"/blobs/{digest}", follow_redirects=False, headers={"Accept-Encoding": "identity"}
    )
    assert r.status_code == 200 and r.content == TEXT
