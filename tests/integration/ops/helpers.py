"""Helpers for the operations tests: build cartons, push them, look at the store."""

from __future__ import annotations

import hashlib
import io
import os

from backports.zstd import zipfile
from sqlalchemy import select

from registry.carton.manifest import build_manifest
from registry.db.tables import CartonFile


def make_carton(
    files: dict[str, bytes],
    *,
    model_name: str | None = "ops-model",
    stored: bool = False,
    linked: dict[str, tuple[str, list[str]]] | None = None,
) -> bytes:
    """A valid noop carton holding ``files`` (plus carton.toml and MANIFEST).

    ``linked`` maps a path to (sha256, urls): named in MANIFEST, absent from the
    zip, listed in LINKS.
    """
    toml = "spec_version = 1\n"
    if model_name is not None:
        toml += f'model_name = "{model_name}"\n'
    toml += (
        "\n[runner]\nrunner_name = 'noop'\nrequired_framework_version = '=1.0.0'\n"
        "runner_compat_version = 1\n"
    )
    members = {"carton.toml": toml.encode(), **files}
    entries = [(p, hashlib.sha256(d).hexdigest()) for p, d in members.items()]
    entries += [(p, digest) for p, (digest, _) in (linked or {}).items()]
    manifest = build_manifest(entries)
    out = io.BytesIO()
    method = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(out, "w") as z:
        for path, data in members.items():
            z.writestr(path, data, compress_type=method)
        z.writestr("MANIFEST", manifest.raw, compress_type=zipfile.ZIP_STORED)
        if linked:
            lines = ["version = 1", "", "[urls]"]
            for digest, urls in linked.values():
                lines.append(f"{digest} = [{', '.join(f'{u!r}' for u in urls)}]")
            z.writestr("LINKS", "\n".join(lines) + "\n")
    return out.getvalue()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def push(client, data: bytes, **params):
    return client.post("/api/v1/cartons", content=data, params=params)


def stored(ctx) -> set[str]:
    return {b.sha256 for b in ctx.blobs.iter_blobs()}


def referenced(ctx) -> set[str]:
    with ctx.sessions() as s:
        return set(s.scalars(select(CartonFile.blob_sha256).distinct()))


def random_bytes(n: int) -> bytes:
    return os.urandom(n)
