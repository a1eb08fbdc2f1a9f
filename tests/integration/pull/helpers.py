"""Helpers for the pull tests: pushing, building small cartons, checking rebuilt ones."""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Mapping
from pathlib import Path

from registry.carton.links import parse_links
from registry.carton.manifest import build_manifest, parse_manifest

CARTON_TOML = b"""spec_version = 1
model_name = "%s"

[runner]
runner_name = 'noop'
required_framework_version = '=1.0.0'
runner_compat_version = 1
"""
INDEX_TOML = b"tensor = []\n"
ALWAYS_INLINE = ("carton.toml", "tensor_data/index.toml")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def push(client, path_or_bytes: Path | bytes, **params):
    data = path_or_bytes.read_bytes() if isinstance(path_or_bytes, Path) else path_or_bytes
    response = client.post("/api/v1/cartons", content=data, params=params)
    assert response.status_code in (200, 201), response.text
    return response.json()


def make_carton(
    files: Mapping[str, bytes],
    *,
    model_name: str = "pulltest",
    absent: Mapping[str, str] | None = None,
) -> bytes:
    """A valid carton zip: carton.toml, tensor_data/index.toml, ``files``, and a MANIFEST.

    ``absent`` maps paths to sha256 listed in MANIFEST but left out of the zip.
    """
    members = {
        "carton.toml": CARTON_TOML % model_name.encode(),
        "tensor_data/index.toml": INDEX_TOML,
        **files,
    }
    entries = [(p, sha256(d)) for p, d in members.items()] + list((absent or {}).items())
    manifest = build_manifest(entries).raw
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in members.items():
            z.writestr(path, data)
        z.writestr("MANIFEST", manifest, compress_type=zipfile.ZIP_STORED)
    return out.getvalue()


def file_sizes(client, manifest_sha256: str) -> dict[str, int]:
    meta = client.get(f"/api/v1/cartons/{manifest_sha256}").json()
    return {f["path"]: f["size"] for f in meta["files"]}


def check_full(body: bytes, manifest_sha256: str) -> None:
    with zipfile.ZipFile(io.BytesIO(body)) as z:
        assert z.testzip() is None
        names = z.namelist()
        assert names[:2] == ["carton.toml", "MANIFEST"]
        raw = z.read("MANIFEST")
        assert sha256(raw) == manifest_sha256
        manifest = parse_manifest(raw)
        assert sorted(names) == sorted(["MANIFEST", *manifest.paths])
        assert "LINKS" not in names and "/MANIFEST" not in names
        for info in z.infolist():
            assert info.compress_type == zipfile.ZIP_STORED
        for entry in manifest.entries:
            assert sha256(z.read(entry.path)) == entry.sha256, entry.path


def check_slim(
    body: bytes, manifest_sha256: str, sizes: Mapping[str, int], threshold: int, public_url: str
) -> dict[str, list[str]]:
    """Check a slim carton; returns its LINKS ({} when it has none)."""
    with zipfile.ZipFile(io.BytesIO(body)) as z:
        assert z.testzip() is None
        names = z.namelist()
        assert names[:2] == ["carton.toml", "MANIFEST"]
        raw = z.read("MANIFEST")
        assert sha256(raw) == manifest_sha256
        manifest = parse_manifest(raw)
        inline = {
            e.path
            for e in manifest.entries
            if e.path in ALWAYS_INLINE or sizes[e.path] <= threshold
        }
        linked = {e.sha256 for e in manifest.entries if e.path not in inline}
        links = parse_links(z.read("LINKS")) if "LINKS" in names else {}
        expected = {"MANIFEST", *inline} | ({"LINKS"} if linked else set())
        assert sorted(names) == sorted(expected)
        assert "/MANIFEST" not in names and "/LINKS" not in names
        for path in ALWAYS_INLINE:
            if path in manifest:
                assert path in names
        assert set(links) == linked
        for digest, urls in links.items():
            assert urls[0] == f"{public_url}/blobs/{digest}"
        for info in z.infolist():
            assert info.compress_type == zipfile.ZIP_STORED
        for entry in manifest.entries:
            if entry.path in inline:
                assert sha256(z.read(entry.path)) == entry.sha256, entry.path
    return links
