"""Pure helpers every test layer shares (no HTTP): build cartons, check rebuilt ones,
and look at what a registry holds.

``tests/integration/*/helpers.py`` add their HTTP helpers on top of these.
"""

from __future__ import annotations

import hashlib
import io
import time
import zipfile
from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select

from registry.carton.links import parse_links, write_links
from registry.carton.manifest import build_manifest, parse_manifest
from registry.carton.paths import CARTON_TOML, LINKS_NAME, MANIFEST_NAME, TENSOR_INDEX
from registry.db.tables import Blob, CartonFile, UploadLease
from registry.services.chunkstore.reader import load_files
from registry.services.context import RegistryContext

RUNNER = (
    "\n[runner]\nrunner_name = 'noop'\nrequired_framework_version = '=1.0.0'\n"
    "runner_compat_version = 1\n"
)
EMPTY_INDEX = b"tensor = []\n"
ALWAYS_INLINE = (CARTON_TOML, TENSOR_INDEX)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def carton_toml(model_name: str | None) -> bytes:
    """A minimal valid carton.toml (the noop runner), named or not."""
    toml = "spec_version = 1\n"
    if model_name is not None:
        toml += f'model_name = "{model_name}"\n'
    return (toml + RUNNER).encode()


def make_carton(
    files: Mapping[str, bytes],
    *,
    model_name: str | None,
    tensor_index: bool = False,
    stored: bool = False,
    linked: Mapping[str, tuple[str, list[str]]] | None = None,
    absent: Mapping[str, str] | None = None,
) -> bytes:
    """A valid carton holding ``files`` plus carton.toml (and an empty tensor index).

    ``linked`` maps a path to (sha256, urls): in MANIFEST, not in the zip, in LINKS.
    ``absent`` maps a path to a sha256: in MANIFEST, in neither the zip nor LINKS.
    """
    members = {CARTON_TOML: carton_toml(model_name)}
    if tensor_index:
        members[TENSOR_INDEX] = EMPTY_INDEX
    members.update(files)
    entries = [(p, sha(d)) for p, d in members.items()]
    entries += [(p, digest) for p, (digest, _) in (linked or {}).items()]
    entries += list((absent or {}).items())
    manifest = build_manifest(entries)
    out = io.BytesIO()
    method = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(out, "w") as z:
        for path, data in members.items():
            z.writestr(path, data, compress_type=method)
        z.writestr(MANIFEST_NAME, manifest.raw, compress_type=zipfile.ZIP_STORED)
        if linked:
            z.writestr(LINKS_NAME, write_links(dict(linked.values())))
    return out.getvalue()


def check_full(body: bytes, manifest_sha256: str) -> None:
    """A rebuilt full carton: every MANIFEST file inline and verified, no LINKS, all Stored."""
    with zipfile.ZipFile(io.BytesIO(body)) as z:
        assert z.testzip() is None
        names = z.namelist()
        assert names[:2] == [CARTON_TOML, MANIFEST_NAME]
        raw = z.read(MANIFEST_NAME)
        assert sha(raw) == manifest_sha256
        manifest = parse_manifest(raw)
        assert sorted(names) == sorted([MANIFEST_NAME, *manifest.paths])
        assert LINKS_NAME not in names and "/" + MANIFEST_NAME not in names
        for info in z.infolist():
            assert info.compress_type == zipfile.ZIP_STORED
        for entry in manifest.entries:
            assert sha(z.read(entry.path)) == entry.sha256, entry.path


def check_slim(
    body: bytes, manifest_sha256: str, sizes: Mapping[str, int], threshold: int, public_url: str
) -> dict[str, list[str]]:
    """Check a rebuilt slim carton; returns its LINKS ({} when it has none)."""
    with zipfile.ZipFile(io.BytesIO(body)) as z:
        assert z.testzip() is None
        names = z.namelist()
        assert names[:2] == [CARTON_TOML, MANIFEST_NAME]
        raw = z.read(MANIFEST_NAME)
        assert sha(raw) == manifest_sha256
        manifest = parse_manifest(raw)
        inline = {
            e.path
            for e in manifest.entries
            if e.path in ALWAYS_INLINE or sizes[e.path] <= threshold
        }
        linked = {e.sha256 for e in manifest.entries if e.path not in inline}
        links = parse_links(z.read(LINKS_NAME)) if LINKS_NAME in names else {}
        expected = {MANIFEST_NAME, *inline} | ({LINKS_NAME} if linked else set())
        assert sorted(names) == sorted(expected)
        assert "/" + MANIFEST_NAME not in names and "/" + LINKS_NAME not in names
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
                assert sha(z.read(entry.path)) == entry.sha256, entry.path
    return links


def stored(ctx: RegistryContext) -> set[str]:
    """The files the store can serve: whole blobs, and chunked files with all their packs."""
    packs = {p.name for p in ctx.blobs.iter_packs()}
    with ctx.sessions() as s:
        files = load_files(s, s.scalars(select(Blob.sha256).where(Blob.chunked.is_(True))))
    chunked = {
        sha
        for sha, f in files.items()
        if f.ranges is not None and all(r.pack in packs for r in f.ranges)
    }
    return {b.sha256 for b in ctx.blobs.iter_blobs()} | chunked


def store_objects(ctx: RegistryContext) -> set[str]:
    """Every object in the store, blobs by digest and packs by name."""
    return {b.sha256 for b in ctx.blobs.iter_blobs()} | {p.name for p in ctx.blobs.iter_packs()}


def referenced(ctx: RegistryContext) -> set[str]:
    """The digests some carton file names."""
    with ctx.sessions() as s:
        return set(s.scalars(select(CartonFile.blob_sha256).distinct()))


def pushes_settled(ctx: RegistryContext, timeout: float = 30.0) -> None:
    """Wait until no push holds a lease: an upload the client cut short has kept what it
    will keep (the server finishes after the client has gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with ctx.sessions() as session:
            if not session.scalar(select(func.count()).select_from(UploadLease)):
                return
        time.sleep(0.05)
    raise AssertionError("a push still holds its lease")


def row_counts(ctx: RegistryContext, *tables: Any) -> dict[str, int]:
    """Rows in each of ``tables`` (ORM classes), by table name."""
    with ctx.sessions() as s:
        return {t.__tablename__: s.scalar(select(func.count()).select_from(t)) for t in tables}
