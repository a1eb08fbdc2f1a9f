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

Small blobs (the ones a slim carton inlines) are immutable and named by their
content, so their bytes are kept in ``ctx.caches.small_blobs``, a bounded LRU: a
carton loader reading a slim carton by many ``Range`` requests does not hit the
blob store for each one. Layouts are kept in ``ctx.caches.layouts``; carton rows
are never cached (a deleted version 404s at once).
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.blobstore.base import BlobStore
from registry.carton.links import write_links
from registry.carton.manifest import parse_manifest
from registry.carton.paths import CARTON_TOML, LINKS_NAME, MANIFEST_NAME, TENSOR_INDEX
from registry.carton.streams import KiB
from registry.carton.zipwrite import StoredZipLayout, ZipEntry
from registry.db.queries import in_chunks
from registry.db.tables import Carton, CartonFile, Pack
from registry.errors import (
    CartonNotFound,
    CartonNotRebuildable,
    InvalidParameter,
    StorageUnavailable,
)
from registry.services.caches import LruCache
from registry.services.chunkstore.reader import StoredFile, iter_file, load_files, read_file
from registry.services.context import RegistryContext
from registry.services.names import require_sha256

FORMS = ("slim", "full")
LAYOUT_VERSION = "1"  # bump when the rebuilt bytes change for the same inputs

# Blobs up to this size have their bytes kept in ``ctx.caches.small_blobs``.
SMALL_BLOB_MAX = 64 * KiB
# Cartons up to this size are kept whole with their cached layout (256 layouts: 64 MiB).
SMALL_CARTON_MAX_BYTES = 256 * KiB


@dataclass(frozen=True)
class ExportedCarton:
    manifest_sha256: str
    form: str
    layout: StoredZipLayout
    etag: str  # quoted, strong
    filename: str
    linked: dict[str, int]  # sha256 -> size of every file left out (slim form)
    # Packs the inline files are read from: a layout is stale once GC rewrote one of them.
    packs: frozenset[str] = frozenset()
    _bytes: bytes | None = field(default=None, repr=False, compare=False)

    @property
    def size(self) -> int:
        return self.layout.size

    def iter_bytes(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        return self.layout.iter_bytes(start, end)

    def small_bytes(self) -> bytes | None:
        """The whole carton, kept with its cached layout, when it is small (slim ones are).

        Built once per layout; larger cartons return None and are streamed.
        """
        if self.size > SMALL_CARTON_MAX_BYTES:
            return None
        cached = self._bytes
        if cached is None:
            cached = b"".join(self.layout.iter_bytes())
            object.__setattr__(self, "_bytes", cached)
        return cached


def _packs_live(session: Session, names: frozenset[str]) -> bool:
    """Whether none of ``names`` was retired (rewritten by GC) since a layout was built."""
    live = 0
    for batch in in_chunks(sorted(names)):
        live += (
            session.scalar(
                select(func.count())
                .select_from(Pack)
                .where(Pack.name.in_(batch), Pack.retired_at.is_(None))
            )
            or 0
        )
    return live == len(names)


def validate_form(form: str) -> str:
    if form not in FORMS:
        raise InvalidParameter(f"invalid form {form!r}: 'slim' or 'full'")
    return form


def carton_etag(ctx: RegistryContext, manifest_sha256: str, form: str) -> str:
    """The strong ETag of a rebuilt carton: manifest, form, and what else changes its bytes."""
    if form == "full":
        return f'"{manifest_sha256}-full-v{LAYOUT_VERSION}"'
    s = ctx.settings
    key = f"{LAYOUT_VERSION}\n{s.public_url}\n{s.slim_inline_max_bytes}".encode()
    return f'"{manifest_sha256}-slim-{hashlib.sha256(key).hexdigest()[:12]}"'


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
    blobs: BlobStore, small_blobs: LruCache[str, bytes], stored: StoredFile
) -> Callable[[int, int], Iterator[bytes]]:
    sha256, size = stored.sha256, stored.size
    if size <= SMALL_BLOB_MAX:

        def read_small(offset: int, length: int) -> Iterator[bytes]:
            data = small_blobs.get(sha256)
            if data is None:
                data = read_file(blobs, stored)
                if len(data) != size:
                    raise StorageUnavailable(
                        f"blob {sha256} holds {len(data)} bytes, the index says {size}"
                    )
                small_blobs.put(sha256, data)
            yield data[offset : offset + length]

        return read_small

    def read_range(offset: int, length: int) -> Iterator[bytes]:
        return iter_file(blobs, stored, offset, offset + length)

    return read_range


def build_carton(ctx: RegistryContext, manifest_sha256: str, form: str = "slim") -> ExportedCarton:
    """Lay out the rebuilt carton (one DB session, closed on return; no blob bytes read)."""
    validate_form(form)
    require_sha256(manifest_sha256)
    key = (manifest_sha256, form)  # the context's settings and store are fixed
    layouts = ctx.caches.layouts
    with ctx.sessions() as session:
        cached = layouts.get(key)
        if cached is not None:
            # Still indexed? (A deleted version's URLs 404 at once, in every process.)
            exists = session.scalar(
                select(Carton.manifest_sha256).where(Carton.manifest_sha256 == manifest_sha256)
            )
            if exists is None:
                layouts.drop(key)
                raise CartonNotFound(f"no carton with manifest hash {manifest_sha256}")
            if not cached.packs or _packs_live(session, cached.packs):
                return cached
            layouts.drop(key)
        row = session.execute(
            select(Carton.manifest, Carton.model_name).where(
                Carton.manifest_sha256 == manifest_sha256
            )
        ).first()
        if row is None:
            raise CartonNotFound(f"no carton with manifest hash {manifest_sha256}")
        raw_manifest, model_name = bytes(row.manifest), row.model_name
        facts = load_files(
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
    missing = {e.sha256 for e in manifest.entries} - facts.keys()
    if missing:
        raise StorageUnavailable(
            f"carton {manifest_sha256}: no blob row for {len(missing)} file(s), "
            f"e.g. {sorted(missing)[0]} (run fsck)"
        )

    threshold = ctx.settings.slim_inline_max_bytes
    blobs, small_blobs = ctx.blobs, ctx.caches.small_blobs
    files: list[ZipEntry] = []
    toml_entry: ZipEntry | None = None
    linked: dict[str, int] = {}
    for e in manifest.entries:
        stored = facts[e.sha256]
        size, crc = stored.size, stored.crc32
        assert crc is not None  # indexed files always have their CRC-32
        inline = form == "full" or e.path in (CARTON_TOML, TENSOR_INDEX) or size <= threshold
        if not inline:
            linked[e.sha256] = size
            continue
        entry = ZipEntry(e.path, size, crc, _blob_reader(blobs, small_blobs, stored))
        if e.path == CARTON_TOML:
            toml_entry = entry
        else:
            files.append(entry)

    entries: list[ZipEntry] = []
    if toml_entry is not None:
        entries.append(toml_entry)
    entries.append(
        ZipEntry(
            MANIFEST_NAME, len(raw_manifest), zlib.crc32(raw_manifest), _bytes_reader(raw_manifest)
        )
    )
    if linked:
        base = ctx.settings.public_url
        links = write_links({sha: [f"{base}/blobs/{sha}"] for sha in linked})
        entries.append(ZipEntry(LINKS_NAME, len(links), zlib.crc32(links), _bytes_reader(links)))
    entries.extend(files)

    exported = ExportedCarton(
        manifest_sha256=manifest_sha256,
        form=form,
        layout=StoredZipLayout(entries),
        etag=carton_etag(ctx, manifest_sha256, form),
        filename=carton_filename(model_name, manifest_sha256, form),
        linked=linked,
        packs=frozenset(
            r.pack
            for e in manifest.entries
            if e.sha256 not in linked and facts[e.sha256].ranges is not None
            for r in facts[e.sha256].ranges or ()
        ),
    )
    layouts.put(key, exported)
    return exported
