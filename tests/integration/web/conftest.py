"""Helpers shared by the web page tests."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

from backports.zstd import zipfile

BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


def manifest_sha256(path_or_bytes: Path | bytes) -> str:
    src = io.BytesIO(path_or_bytes) if isinstance(path_or_bytes, bytes) else path_or_bytes
    with zipfile.ZipFile(src) as z:
        return hashlib.sha256(z.read("MANIFEST")).hexdigest()


def manifest_entries(path: Path) -> dict[str, str]:
    with zipfile.ZipFile(path) as z:
        lines = z.read("MANIFEST").decode().splitlines()
    return dict(line.rsplit("=", 1) for line in lines if line)


def with_carton_toml(src: Path, toml: bytes) -> bytes:
    """A copy of a fixture carton with another carton.toml (and its MANIFEST line fixed)."""
    with zipfile.ZipFile(src) as z:
        manifest = z.read("MANIFEST").decode()
    lines = [
        f"carton.toml={hashlib.sha256(toml).hexdigest()}"
        if line.startswith("carton.toml=")
        else line
        for line in manifest.splitlines()
    ]
    replace = {"carton.toml": toml, "MANIFEST": ("\n".join(lines) + "\n").encode()}
    out = io.BytesIO()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            data = replace.get(info.filename, zin.read(info.filename))
            zout.writestr(info.filename, data, compress_type=zipfile.ZIP_DEFLATED)
    return out.getvalue()


def small_model(name: str, description: str = "", runner: str = "noop") -> bytes:
    """A valid carton (fixture 01's files) named ``name`` with a description and runner."""
    from tests.conftest import fixture_carton

    desc = description.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    toml = (
        "spec_version = 1\n"
        f'model_name = "{name}"\n'
        f'model_description = "{desc}"\n'
        "\n[runner]\n"
        f'runner_name = "{runner}"\n'
        "required_framework_version = '=1.0.0'\n"
        "runner_compat_version = 1\n"
    ).encode()
    return with_carton_toml(fixture_carton("01"), toml)
