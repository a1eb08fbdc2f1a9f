"""SQLAlchemy tables: the index over the blob store.

The MANIFEST is the one truth: a carton row keeps its exact bytes, and one
``carton_files`` row per MANIFEST entry. Blob rows are written in the same
transaction that first references them, after the bytes are in the store.

Long because every table is declared here: one metadata, which Alembic compares
the migrations against, and one place to read the whole schema.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

# Constraint names are stable across databases so migrations can refer to them.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

VERSION_STATES = ("READY", "UNAVAILABLE")


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timestamps are UTC; SQLite drops the zone on storage, so put it back on reads."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_result_value(self, value: datetime | None, dialect: object) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


def _sha256_checks(column: str) -> tuple[CheckConstraint, CheckConstraint]:
    """A digest is 64 lowercase hex characters; Postgres checks the alphabet too."""
    return (
        CheckConstraint(f"length({column}) = 64", name=f"{column}_length"),
        CheckConstraint(f"{column} ~ '^[0-9a-f]{{64}}$'", name=f"{column}_hex").ddl_if(
            dialect="postgresql"
        ),
    )


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    if TYPE_CHECKING:
        # Every model here maps one Table; SQLAlchemy types __table__ as any FromClause.
        __table__: ClassVar[Table]


class Blob(Base):
    __tablename__ = "blobs"
    __table_args__ = (
        *_sha256_checks("sha256"),
        CheckConstraint("size >= 0", name="size_nonnegative"),
        CheckConstraint("crc32 >= 0 AND crc32 <= 4294967295", name="crc32_range"),
        Index("ix_blobs_size", "size"),
    )

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger, nullable=False)
    crc32: Mapped[int] = mapped_column(BigInteger, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # True: the bytes are read from ``blob_segments`` (chunks in packs), not a whole object.
    chunked: Mapped[bool] = mapped_column(
        Boolean, nullable=False, default=False, server_default=false()
    )


class Pack(Base):
    """A store object holding chunks back to back (docs/chunk-store.md)."""

    __tablename__ = "packs"
    __table_args__ = (
        CheckConstraint("size >= 0", name="size_nonnegative"),
        CheckConstraint("chunk_count >= 0", name="chunk_count_nonnegative"),
        CheckConstraint("length(name) = 32", name="name_length"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(32), nullable=False, unique=True)
    size: Mapped[int] = mapped_column(BigInteger, nullable=False)
    chunk_count: Mapped[int] = mapped_column(Integer, nullable=False)
    # Per chunk, in pack order: its 32-byte BLAKE3 digest and its length (4 bytes, big-endian).
    chunk_table: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # Set when GC rewrote the pack's live chunks elsewhere; the object goes after the grace.
    retired_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class Chunk(Base):
    """Where a chunk can be read: one copy per distinct chunk (the dedup index)."""

    __tablename__ = "chunks"
    __table_args__ = (
        *_sha256_checks("hash"),
        CheckConstraint("length > 0", name="length_positive"),
        Index("ix_chunks_pack_id", "pack_id"),
    )

    hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    pack_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("packs.id", ondelete="CASCADE"), nullable=False
    )
    idx: Mapped[int] = mapped_column(Integer, nullable=False)
    offset: Mapped[int] = mapped_column(BigInteger, nullable=False)
    length: Mapped[int] = mapped_column(Integer, nullable=False)


class DamagedChunk(Base):
    """A stored copy of a chunk that cannot be served: its bytes do not hash to its name
    (``corrupt``) or its pack is gone (``missing``). Filled by fsck, verified reads and
    the scrub; cleared when a push writes a good copy and repoints the index to it
    (docs/chunk-store.md, "Damage and healing")."""

    __tablename__ = "damaged_chunks"
    __table_args__ = (
        *_sha256_checks("hash"),
        Index("ix_damaged_chunks_hash", "hash"),
    )

    pack_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("packs.id", ondelete="CASCADE"), primary_key=True
    )
    idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    hash: Mapped[str] = mapped_column(String(64), nullable=False)
    reason: Mapped[str] = mapped_column(String(16), nullable=False)  # corrupt | missing
    found_by: Mapped[str] = mapped_column(String(16), nullable=False)  # fsck | read | scrub
    found_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class DamagedBlob(Base):
    """A whole blob whose stored object does not hash to its name (``corrupt``) or has
    another size than its row says (``wrong_size``). Filled by verified reads and fsck;
    cleared when a push or an upload of the same bytes replaces the object
    (docs/chunk-store.md, "Verified reads, damage and healing")."""

    __tablename__ = "damaged_blobs"
    __table_args__ = (*_sha256_checks("sha256"),)

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    reason: Mapped[str] = mapped_column(String(16), nullable=False)  # corrupt | wrong_size
    found_by: Mapped[str] = mapped_column(String(16), nullable=False)  # fsck | read
    found_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class BlobSegment(Base):
    """A run of consecutive chunks of one pack; a chunked blob is its segments in order."""

    __tablename__ = "blob_segments"
    __table_args__ = (
        CheckConstraint("end_chunk > first_chunk", name="chunks_nonempty"),
        CheckConstraint("length > 0", name="length_positive"),
        Index("ix_blob_segments_pack_id", "pack_id"),
    )

    blob_sha256: Mapped[str] = mapped_column(
        String(64), ForeignKey("blobs.sha256", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    pack_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("packs.id", ondelete="RESTRICT"), nullable=False
    )
    first_chunk: Mapped[int] = mapped_column(Integer, nullable=False)
    end_chunk: Mapped[int] = mapped_column(Integer, nullable=False)
    file_offset: Mapped[int] = mapped_column(BigInteger, nullable=False)
    pack_offset: Mapped[int] = mapped_column(BigInteger, nullable=False)
    length: Mapped[int] = mapped_column(BigInteger, nullable=False)


class Carton(Base):
    __tablename__ = "cartons"
    __table_args__ = (
        *_sha256_checks("manifest_sha256"),
        CheckConstraint("file_count >= 0", name="file_count_nonnegative"),
        CheckConstraint("total_bytes >= 0", name="total_bytes_nonnegative"),
    )

    manifest_sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    manifest: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    carton_toml: Mapped[str] = mapped_column(Text, nullable=False)
    spec_version: Mapped[int] = mapped_column(Integer, nullable=False)
    model_name: Mapped[str | None] = mapped_column(String(255), index=True)
    short_description: Mapped[str | None] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    runner_name: Mapped[str | None] = mapped_column(String(255))
    framework_version: Mapped[str | None] = mapped_column(String(255))
    runner_compat_version: Mapped[int | None] = mapped_column(Integer)
    required_platforms: Mapped[list[str]] = mapped_column(JSON, nullable=False, default=list)
    file_count: Mapped[int] = mapped_column(Integer, nullable=False)
    total_bytes: Mapped[int] = mapped_column(BigInteger, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    files: Mapped[list[CartonFile]] = relationship(
        back_populates="carton",
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by="CartonFile.path",
    )


class CartonFile(Base):
    __tablename__ = "carton_files"
    __table_args__ = (
        CheckConstraint("size >= 0", name="size_nonnegative"),
        # Covers "which cartons use this blob" without touching the table.
        Index("ix_carton_files_blob_sha256_manifest", "blob_sha256", "manifest_sha256"),
    )

    manifest_sha256: Mapped[str] = mapped_column(
        String(64), ForeignKey("cartons.manifest_sha256", ondelete="CASCADE"), primary_key=True
    )
    path: Mapped[str] = mapped_column(Text, primary_key=True)
    blob_sha256: Mapped[str] = mapped_column(
        String(64), ForeignKey("blobs.sha256", ondelete="RESTRICT"), nullable=False
    )
    size: Mapped[int] = mapped_column(BigInteger, nullable=False)

    carton: Mapped[Carton] = relationship(back_populates="files")


class CartonLineage(Base):
    """A carton's closest stored ancestor by shared bytes, computed at push
    (``registry.services.lineage``). No row: not computed yet; ``parent_sha256`` null: none.

    Deleting the parent deletes the row (the child's lineage is computed again), so a
    parent is always a stored carton.
    """

    __tablename__ = "carton_lineage"
    __table_args__ = (
        CheckConstraint("bytes_shared >= 0", name="bytes_shared_nonnegative"),
        CheckConstraint("bytes_total >= 0", name="bytes_total_nonnegative"),
        CheckConstraint("parent_sha256 <> manifest_sha256", name="not_own_parent"),
        Index("ix_carton_lineage_parent_sha256", "parent_sha256"),
    )

    manifest_sha256: Mapped[str] = mapped_column(
        String(64), ForeignKey("cartons.manifest_sha256", ondelete="CASCADE"), primary_key=True
    )
    parent_sha256: Mapped[str | None] = mapped_column(
        String(64), ForeignKey("cartons.manifest_sha256", ondelete="CASCADE")
    )
    # Bytes of this carton's distinct files that the parent holds, of ``bytes_total``.
    bytes_shared: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    bytes_total: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    computed_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Model(Base):
    __tablename__ = "models"
    __table_args__ = (
        CheckConstraint("last_version >= 0", name="last_version_nonnegative"),
        Index("ix_models_updated_at_id", "updated_at", "id"),
        Index("ix_models_latest_bytes_id", "latest_bytes", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    # The full name: ``model`` in the root namespace, ``namespace/model`` in another.
    name: Mapped[str] = mapped_column(String(255), nullable=False, unique=True)
    # The part of ``name`` before its ``/``, "" for the root namespace: what access is
    # decided by, indexed so a listing filters on it without parsing names.
    namespace: Mapped[str] = mapped_column(
        String(64), nullable=False, default="", server_default="", index=True
    )
    # Version numbers are never reused: the counter only grows, even after deletes.
    last_version: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    # The listing's view of the highest live version, kept by the services that add or
    # remove versions, so a page of 100k models is one indexed range scan.
    latest_version: Mapped[int | None] = mapped_column(Integer)
    latest_bytes: Mapped[int | None] = mapped_column(BigInteger)
    search_text: Mapped[str] = mapped_column(Text, nullable=False, default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    versions: Mapped[list[Version]] = relationship(
        back_populates="model", cascade="all, delete-orphan", passive_deletes=True
    )


class ModelSearchTokens(Base):
    """``field:value`` tokens of a model's latest version (``registry.services.search``).

    A table of its own, not a column of ``models``: free-text search scans
    ``models.search_text``, and wider rows there would slow every such scan.
    """

    __tablename__ = "model_search_tokens"

    model_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("models.id", ondelete="CASCADE"), primary_key=True
    )
    tokens: Mapped[str] = mapped_column(Text, nullable=False, default="")


class Version(Base):
    __tablename__ = "versions"
    __table_args__ = (
        UniqueConstraint("model_id", "version", name="uq_versions_model_id_version"),
        UniqueConstraint("model_id", "manifest_sha256", name="uq_versions_model_id_manifest"),
        CheckConstraint("version >= 1", name="version_positive"),
        CheckConstraint("state IN ('READY', 'UNAVAILABLE')", name="state_known"),
        Index("ix_versions_manifest_sha256", "manifest_sha256"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("models.id", ondelete="CASCADE"), nullable=False
    )
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    manifest_sha256: Mapped[str] = mapped_column(
        String(64), ForeignKey("cartons.manifest_sha256", ondelete="RESTRICT"), nullable=False
    )
    state: Mapped[str] = mapped_column(String(16), nullable=False, default="READY")
    state_reason: Mapped[str] = mapped_column(Text, nullable=False, default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    model: Mapped[Model] = relationship(back_populates="versions")
    carton: Mapped[Carton] = relationship()


class Tag(Base):
    __tablename__ = "tags"

    model_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("models.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    version_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("versions.id", ondelete="CASCADE"), nullable=False, index=True
    )
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    version: Mapped[Version] = relationship()


class UploadLease(Base):
    """A push in progress: GC never deletes a blob named by a live lease."""

    __tablename__ = "upload_leases"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    holder: Mapped[str] = mapped_column(Text, nullable=False, default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)


class LeaseBlob(Base):
    __tablename__ = "lease_blobs"
    __table_args__ = (Index("ix_lease_blobs_sha256", "sha256"),)

    lease_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("upload_leases.id", ondelete="CASCADE"), primary_key=True
    )
    # Not a foreign key: the blob row does not exist until the push commits.
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)


class LeasePack(Base):
    __tablename__ = "lease_packs"
    __table_args__ = (Index("ix_lease_packs_pack_name", "pack_name"),)

    lease_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("upload_leases.id", ondelete="CASCADE"), primary_key=True
    )
    # A name, not a foreign key: the pack's row exists only once it is sealed.
    pack_name: Mapped[str] = mapped_column(String(32), primary_key=True)


class ChunkClaim(Base):
    """A chunk a push is about to write: taken (the primary key decides between racing
    pushes) before its bytes go into a pack, so concurrent pushes store it once.

    Gone once the chunk's row is published, or with its lease (a crashed push's claims
    expire with its heartbeat). ``wanted``: another push waits for this chunk, so its
    holder seals its open pack now rather than when full (docs/chunk-store.md).
    """

    __tablename__ = "chunk_claims"
    __table_args__ = (Index("ix_chunk_claims_lease_id", "lease_id"),)

    hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    lease_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("upload_leases.id", ondelete="CASCADE"), nullable=False
    )
    wanted: Mapped[bool] = mapped_column(
        Boolean, nullable=False, default=False, server_default=false()
    )


class IndexGeneration(Base):
    """One row whose ``value`` grows in every transaction that removes what a reader may
    have cached: a version or carton, a blob, a blob found damaged
    (``registry.services.freshness``)."""

    __tablename__ = "index_generation"
    __table_args__ = (CheckConstraint("id = 1", name="single_row"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    value: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)


NAMESPACE_VISIBILITIES = ("public", "private")


class Namespace(Base):
    """A namespace other than the root one (which has no row and is public)."""

    __tablename__ = "namespaces"
    __table_args__ = (
        CheckConstraint("visibility IN ('public', 'private')", name="visibility_known"),
        CheckConstraint("length(name) >= 1 AND length(name) <= 64", name="name_length"),
    )

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    visibility: Mapped[str] = mapped_column(String(16), nullable=False, default="public")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class BlobUpload(Base):
    """Who uploaded a blob lately: dedup negotiation answers "present" to that token only
    (besides tokens that can read a carton holding the blob), so it tells nobody else
    whether some bytes are stored (``registry.services.access``)."""

    __tablename__ = "blob_uploads"
    __table_args__ = (Index("ix_blob_uploads_uploaded_at", "uploaded_at"),)

    # 0: no token (``REGISTRY_AUTH=off``).
    token_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    uploaded_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(255), nullable=False, default="")
    token_hash: Mapped[str] = mapped_column(String(64), nullable=False, unique=True)
    scopes: Mapped[str] = mapped_column(String(255), nullable=False)
    # Comma-separated namespaces the token acts in; "" for a global token.
    namespaces: Mapped[str] = mapped_column(Text, nullable=False, default="", server_default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
