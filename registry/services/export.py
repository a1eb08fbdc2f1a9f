"""Rebuilt cartons: a manifest hash -> a byte-deterministic Stored zip, slim or full.

Members, in order: ``carton.toml``, ``MANIFEST`` (the exact bytes stored at push,
never re-serialised), ``LINKS`` (slim form, when something is linked), then every
other MANIFEST file in MANIFEST order (bytewise sorted). Every member is Stored,
with its size and CRC-32 taken from the ``blobs`` rows, so the whole zip is laid
out before a byte is read: exact ``size``, any byte range, constant memory.

- **full**: every MANIFEST file inline, no LINKS.
- **slim**: ``carton.toml``, ``tensor_data/index.toml`` and every file of at
  most ``settings.slim_inline_max_bytes`` inline; a ``LINKS`` file maps the
  sha256 of every other file to ``[f"{settings.public_url}/blobs/{sha256}"]``.

The bytes depend on the manifest, the form and (slim only) ``public_url`` and
``slim_inline_max_bytes``; the ETag encodes all of them.

What the read path needs is kept in ``ctx.caches.facts`` (``registry.services.caches``):
the layout by (manifest hash, form), with a small carton's whole bytes (slim cartons
are small), and the verified bytes of the small blobs it inlines. They stay valid until
a verb removes something (``registry.services.freshness``): a deleted version's
carton 404s at once, in every process, and a HEAD or GET of a known carton needs no
database round trip. Member bytes come from ``registry.services.stored_blobs``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from sqlalchemy import select

from registry.blobstore import BlobNotFound
from registry.carton.canonical import full_etag, full_layout
from registry.carton.links import write_links
from registry.carton.manifest import parse_manifest
from registry.carton.paths import CARTON_TOML, LINKS_NAME, MANIFEST_NAME, TENSOR_INDEX
from registry.carton.streams import KiB, crc32
from registry.carton.zipwrite import StoredZipLayout, ZipEntry
from registry.db.tables import Carton, CartonFile
from registry.errors import (
    CartonNotFound,
    CartonNotRebuildable,
    InvalidParameter,
    StorageUnavailable,
)
from registry.services.access import carton_is_private
from registry.services.chunkstore.reader import StoredFile
from registry.services.context import RegistryContext
from registry.services.freshness import current_generation
from registry.services.names import require_sha256
from registry.services.signing import link_expiry, signed_query
from registry.services.stored_blobs import (
    load_blobs,
    missing_from_store,
    read_blob,
    verified_small_blob,
)

FORMS = ("slim", "full")
LAYOUT_VERSION = "1"  # bump when the slim form's bytes change (the full form's: carton.canonical)

# Blobs up to this size have their verified bytes kept in ``ctx.caches.facts.small_blobs``.
SMALL_BLOB_MAX = 64 * KiB
# Cartons up to this size are kept whole with their cached layout (256 layouts: 64 MiB).
SMALL_CARTON_MAX_BYTES = 256 * KiB


@dataclass(frozen=True)
class ExportedCarton:
    """A rebuilt carton laid out; ``whole`` holds its bytes when it is small (slim ones are)."""

    manifest_sha256: str
    form: str
    layout: StoredZipLayout
    etag: str  # quoted, strong
    filename: str
    linked: dict[str, int]  # sha256 -> size of every file left out (slim form)
    whole: bytes | None = field(default=None, repr=False, compare=False)
    # A private model's slim carton: when its signed LINKS URLs expire (its bytes change
    # with each signing step, ``registry.services.signing``); None: plain URLs.
    links_expire: int | None = None

    @property
    def size(self) -> int:
        return self.layout.size

    def iter_bytes(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        return self.layout.iter_bytes(start, end)


def validate_form(form: str) -> str:
    if form not in FORMS:
        raise InvalidParameter(f"invalid form {form!r}: 'slim' or 'full'")
    return form


def carton_etag(
    ctx: RegistryContext, manifest_sha256: str, form: str, links_expire: int | None = None
) -> str:
    """The strong ETag of a rebuilt carton: manifest, form, and what else changes its bytes
    (a private model's signed LINKS: their expiry)."""
    if form == "full":
        return full_etag(manifest_sha256)
    s = ctx.settings
    key = f"{LAYOUT_VERSION}\n{s.public_url}\n{s.slim_inline_max_bytes}".encode()
    signed = f"-e{links_expire}" if links_expire is not None else ""
    return f'"{manifest_sha256}-slim-{hashlib.sha256(key).hexdigest()[:12]}{signed}"'


_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")


def carton_filename(model_name: str | None, manifest_sha256: str, form: str) -> str:
    stem = _UNSAFE_FILENAME.sub("_", model_name or "").strip("._-")[:80]
    parts = [p for p in (stem, manifest_sha256[:12], "full" if form == "full" else "") if p]
    return "-".join(parts) + ".carton"


def _bytes_reader(data: bytes) -> Callable[[int, int], Iterator[bytes]]:
    def read_range(offset: int, length: int) -> Iterator[bytes]:
        yield data[offset : offset + length]

    return read_range


def _blob_reader(
    ctx: RegistryContext, blob: StoredFile, generation: int
) -> Callable[[int, int], Iterator[bytes]]:
    if blob.size <= SMALL_BLOB_MAX:

        def read_small(offset: int, length: int) -> Iterator[bytes]:
            yield verified_small_blob(ctx, blob, generation)[offset : offset + length]

        return read_small

    def read_range(offset: int, length: int) -> Iterator[bytes]:
        try:
            yield from read_blob(ctx, blob, offset, offset + length)
        except BlobNotFound:
            raise missing_from_store(blob.sha256) from None

    return read_range


def cached_carton(ctx: RegistryContext, manifest_sha256: str, form: str) -> ExportedCarton | None:
    """The carton's layout if this process knows it and still trusts it; never any I/O."""
    facts = ctx.caches.facts
    if facts.current() is None:
        return None
    exported = facts.cartons.get((manifest_sha256, form))
    if exported is not None and exported.links_expire not in (None, link_expiry(ctx.settings)):
        return None  # signed for an earlier step: sign again
    return exported


def build_carton(ctx: RegistryContext, manifest_sha256: str, form: str = "slim") -> ExportedCarton:
    """Lay out the rebuilt carton (one DB session, closed on return), or take it from memory.

    A small carton's bytes are read with its layout (its inlined blobs verified).
    """
    validate_form(form)
    require_sha256(manifest_sha256)
    key = (manifest_sha256, form)  # the context's settings and store are fixed
    generation = current_generation(ctx)
    facts = ctx.caches.facts
    cached = cached_carton(ctx, manifest_sha256, form)
    if cached is not None:
        return cached
    with ctx.sessions() as session:
        private = form == "slim" and carton_is_private(session, manifest_sha256)
        row = session.execute(
            select(Carton.manifest, Carton.model_name).where(
                Carton.manifest_sha256 == manifest_sha256
            )
        ).first()
        if row is None:
            raise CartonNotFound(f"no carton with manifest hash {manifest_sha256}")
        raw_manifest, model_name = bytes(row.manifest), row.model_name
        stored = load_blobs(
            session,
            session.scalars(
                select(CartonFile.blob_sha256).where(CartonFile.manifest_sha256 == manifest_sha256)
            ),
        )

    manifest = parse_manifest(raw_manifest)
    reserved = {MANIFEST_NAME, LINKS_NAME} & manifest.paths
    if reserved:
        raise CartonNotRebuildable(
            f"carton {manifest_sha256} lists {sorted(reserved)} in its MANIFEST; "
            "it cannot be rebuilt"
        )
    missing = {e.sha256 for e in manifest.entries} - stored.keys()
    if missing:
        raise StorageUnavailable(
            f"carton {manifest_sha256}: no blob row for {len(missing)} file(s), "
            f"e.g. {sorted(missing)[0]} (run fsck)"
        )

    threshold = ctx.settings.slim_inline_max_bytes
    files: list[ZipEntry] = []
    toml_entry: ZipEntry | None = None
    linked: dict[str, int] = {}
    for e in manifest.entries:
        blob = stored[e.sha256]
        size, crc = blob.size, int(blob.crc32 or 0)  # indexed blobs always have their CRC
        inline = form == "full" or e.path in (CARTON_TOML, TENSOR_INDEX) or size <= threshold
        if not inline:
            linked[e.sha256] = size
            continue
        entry = ZipEntry(e.path, size, crc, _blob_reader(ctx, blob, generation))
        if e.path == CARTON_TOML:
            toml_entry = entry
        else:
            files.append(entry)

    entries: list[ZipEntry] = []
    if toml_entry is not None:
        entries.append(toml_entry)
    entries.append(
        ZipEntry(MANIFEST_NAME, len(raw_manifest), crc32(raw_manifest), _bytes_reader(raw_manifest))
    )
    expires = link_expiry(ctx.settings) if private and linked else None
    if linked:
        base = ctx.settings.public_url
        if expires is not None:  # the loader sends no token: each URL carries its signature
            urls = {
                sha: [f"{base}/blobs/{sha}?{signed_query(ctx.settings, sha, expires)}"]
                for sha in linked
            }
        else:
            urls = {sha: [f"{base}/blobs/{sha}"] for sha in linked}
        links = write_links(urls)
        entries.append(ZipEntry(LINKS_NAME, len(links), crc32(links), _bytes_reader(links)))
    entries.extend(files)

    if form == "full":  # the one byte form every writer of a full carton shares
        layout = full_layout(manifest, {e.name: (e.size, e.crc32, e.read_range) for e in entries})
    else:
        layout = StoredZipLayout(entries)
    exported = ExportedCarton(
        manifest_sha256=manifest_sha256,
        form=form,
        layout=layout,
        etag=carton_etag(ctx, manifest_sha256, form, expires),
        filename=carton_filename(model_name, manifest_sha256, form),
        linked=linked,
        whole=b"".join(layout.iter_bytes()) if layout.size <= SMALL_CARTON_MAX_BYTES else None,
        links_expire=expires,
    )
    facts.remember(facts.cartons, key, exported, generation)
    return exported
