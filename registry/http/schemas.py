"""Typed bodies of ``/api/v1``: what the JSON API accepts and answers (and OpenAPI shows).

Responses are converted from the services' plain values with ``as_body(value,
Type)``; a key a service adds without a field here fails loudly (tests), it is
never dropped in silence.

Requests are decoded by ``StrictJSON`` (a DTO, so OpenAPI describes the body):
strictly, unlike Litestar's default, which would take the string ``"1"`` for
the integer 1; malformed bodies answer 400 ``InvalidBody`` naming the expected
shape. Handlers that take a body set ``request_max_body_size`` so Litestar
answers 413 past it, whether declared by Content-Length or received.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

import msgspec
from litestar.dto import MsgspecDTO

from registry.errors import InvalidBody

T = TypeVar("T")
StructT = TypeVar("StructT", bound=msgspec.Struct)

# JSON documents here are small (hash lists, tag moves): 16 MiB holds 200k hashes.
MAX_JSON_BODY_BYTES = 16 * 1024 * 1024


def as_body(value: Any, type_: type[T]) -> T:
    """A service's result (dict, or object with attributes) as the response struct."""
    return msgspec.convert(value, type_, from_attributes=True)


class Body(msgspec.Struct, forbid_unknown_fields=True):
    """A response body: every key a service returns has a field."""


class RequestBody(msgspec.Struct):
    """A request body; ``SHAPE`` is the example named in error messages."""

    SHAPE: ClassVar[str]

    @classmethod
    def invalid(cls, detail: str = "") -> InvalidBody:
        """The error for a body that does not have this shape (``detail``: what is off)."""
        return InvalidBody(f"body must be {cls.SHAPE}" + (f": {detail}" if detail else ""))


class StrictJSON(MsgspecDTO[StructT]):
    """Decodes a JSON body into its struct without type coercion; errors are ``InvalidBody``."""

    def decode_bytes(self, value: bytes) -> Any:
        """The struct, or None for a blank body (handlers take ``data: T | None = None``)."""
        if not value.strip():
            return None
        model: Any = self.model_type
        try:
            return msgspec.json.decode(value, type=model)
        except msgspec.ValidationError as exc:
            raise model.invalid(str(exc)) from exc
        except msgspec.DecodeError as exc:
            raise InvalidBody(f"request body is not valid JSON: {exc}") from exc


# --- blobs ------------------------------------------------------------------------------


class MissingBlobsQuery(RequestBody):
    SHAPE: ClassVar[str] = '{"sha256": ["<hex>", ...]}'

    sha256: list[str]


class MissingBlobs(Body):
    missing: list[str]


class StoredBlob(Body):
    sha256: str
    size: int
    created: bool


class UploadedBlob(StoredBlob):
    """A whole-blob upload's answer: also the bytes really stored (after chunk dedup), and
    those written again in place of damaged copies (not ``created``: the file was known)."""

    bytes_stored: int
    bytes_healed: int


class UploadedBlobs(Body):
    """The answers of an upload of several files (``POST /api/v1/blobs``), in its order; the
    chunk bytes its session wrote in place of damaged copies are counted in the first."""

    blobs: list[UploadedBlob]


# --- pushes -----------------------------------------------------------------------------


class PushedCarton(Body):
    """What this push did (DESIGN.md "Push response"); ``bytes_stored`` <= ``bytes_new``."""

    manifest_sha256: str
    model_name: str | None
    version: int | None
    files: int
    bytes_total: int
    bytes_new: int
    bytes_deduplicated: int
    bytes_stored: int  # bytes this push added to the store after chunk-level dedup
    # bytes written again in place of damaged or lost copies (healing; not in bytes_new)
    bytes_healed: int


# --- cartons ----------------------------------------------------------------------------


class Runner(Body):
    runner_name: str | None
    required_framework_version: str | None
    runner_compat_version: int | None
    opts: dict[str, Any]


class TensorSpec(Body):
    name: str
    dtype: str
    shape: str | list[int | str]
    description: str | None


class SelfTest(Body):
    name: str | None
    description: str | None
    inputs: dict[str, str]
    expected_out: dict[str, str] | None


class Example(Body):
    name: str | None
    description: str | None
    inputs: dict[str, str]
    sample_out: dict[str, str]


class CartonFile(Body):
    path: str
    sha256: str
    size: int


class CartonVersion(Body):
    model_name: str
    version: int
    state: str
    reason: str
    tags: list[str]


class CartonDetail(Body):
    manifest_sha256: str
    model_name: str | None
    short_description: str | None
    description: str | None
    spec_version: int
    runner: Runner
    required_platforms: list[str]
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    self_tests: list[SelfTest]
    examples: list[Example]
    carton_toml: str
    files: list[CartonFile]
    file_count: int
    bytes_total: int
    created_at: str | None
    versions: list[CartonVersion]


# --- models -----------------------------------------------------------------------------


class ModelSummary(Body):
    name: str
    latest_version: int
    manifest_sha256: str
    short_description: str | None
    description_first_line: str
    runner_name: str | None
    bytes_total: int
    updated_at: str | None
    state: str


class ModelList(Body):
    models: list[ModelSummary]
    next_cursor: str | None


class ModelVersion(Body):
    version: int
    manifest_sha256: str
    created_at: str | None
    state: str
    reason: str
    bytes_total: int
    files: int


class TagRef(Body):
    version: int
    manifest_sha256: str


class ModelDetail(Body):
    name: str
    created_at: str | None
    updated_at: str | None
    versions: list[ModelVersion]
    tags: dict[str, TagRef]


class ModelDeleted(Body):
    model_name: str
    versions: int
    cartons_deleted: int


class VersionDeleted(Body):
    model_name: str
    version: int
    manifest_sha256: str
    carton_deleted: bool


# --- tags -------------------------------------------------------------------------------


class TagMove(RequestBody):
    SHAPE: ClassVar[str] = '{"manifest_sha256": "..."} or {"version": N}'

    manifest_sha256: str | None = None
    version: int | None = None


class TagTarget(Body):
    model_name: str
    tag: str
    version: int
    manifest_sha256: str


class TagDeleted(Body):
    model_name: str
    tag: str
    deleted: bool


class Identity(Body, omit_defaults=True):
    """How the registry sees a request's token (``GET /api/v1/whoami``)."""

    auth: str
    scopes: list[str]
    # None: a global token (or none); else the namespaces the token acts in.
    namespaces: list[str] | None = None


# --- namespaces -------------------------------------------------------------------------


class NamespacePut(RequestBody):
    SHAPE: ClassVar[str] = '{"visibility": "public"} or {"visibility": "private"}'

    visibility: str


class NamespaceSummary(Body):
    name: str
    visibility: str
    created_at: str | None
    models: int | None = None


class NamespaceList(Body):
    namespaces: list[NamespaceSummary]


class NamespaceDetail(Body):
    name: str
    visibility: str
    created_at: str | None
    models: int
    model_names: list[str]


# --- stats ------------------------------------------------------------------------------


class Stats(Body):
    models: int
    cartons: int
    blobs: int
    logical_bytes: int
    stored_bytes: int
    dedup_ratio: float | None


# --- chunk transfer (docs/chunk-transfer.md) ---------------------------------------------


class Chunking(Body):
    avg_size: int
    min_size: int
    max_size: int
    normalization: int
    hash: str
    min_file_bytes: int
    max_batch_bytes: int
    max_batch_records: int
    max_query: int
    max_assemble: int
    max_assemble_ratio: float
    assemble_ratio_min_bytes: int
    max_concurrent_uploads: int
    cut_upload_type: str
    """The ``Content-Type`` of a whole upload sent as the chunks its sender cut."""
    cut_files_type: str
    """The ``Content-Type`` of several whole files in one upload (``POST /api/v1/blobs``)."""


class MissingChunksQuery(RequestBody):
    SHAPE: ClassVar[str] = '{"chunks": ["<blake3 hex>", ...]}'

    chunks: list[str]


class MissingChunks(Body):
    missing: list[str]


class StoredChunks(Body):
    chunks: int
    stored: int
    bytes_stored: int
    bytes_healed: int  # of the chunks sent, written again in place of damaged copies


class AssembleQuery(RequestBody):
    SHAPE: ClassVar[str] = '{"size": N, "chunks": ["<blake3 hex>", ...]}'

    size: int
    chunks: list[str]


class FileChunk(Body):
    hash: str
    offset: int
    size: int


class Reconstruction(Body, omit_defaults=True):
    """A file's chunks; a file stored whole has ``"chunked": false`` and no ``chunks`` key."""

    sha256: str
    size: int
    chunked: bool
    chunks: list[FileChunk] | None = None
