"""Errors a client can cause, named by what went wrong.

Services raise these; they carry a message and nothing about HTTP. Each
derives from one *kind* (``InvalidRequest``, ``NotFound``, ``Conflict``, ...),
and ``registry.http.errors.STATUS_BY_ERROR`` is the one table that maps kinds
to statuses and the ``{"error": message}`` body. The CLI prints the message and
exits non-zero. The blob store (``registry.blobstore.errors``), the carton
format (``registry.carton.errors``) and the Triton wire formats
(``registry.triton.errors``) raise their own errors; the same table translates them.
"""

from __future__ import annotations


class RegistryError(Exception):
    """Base of every error the registry reports to a client."""

    # Extra JSON fields of the error body, for clients that act on them.
    details: dict[str, object] | None = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


# --- kinds (the HTTP edge maps each to one status) ------------------------------------


class InvalidRequest(RegistryError):
    """The request is malformed or breaks a documented rule."""


class AuthRefusal(RegistryError):
    """Base of the two auth kinds: ``challenge`` tells the client how to authenticate."""

    def __init__(self, message: str, *, challenge: str = "") -> None:
        super().__init__(message)
        self.challenge = challenge


class AuthenticationRequired(AuthRefusal):
    """No token, or one the registry does not know."""


class PermissionDenied(AuthRefusal):
    """A known token whose scopes do not cover the request."""


class NotFound(RegistryError):
    """What the request names does not exist (or no longer does)."""


class InferenceElsewhere(NotFound):
    """An infer request: this registry is a model repository, inference runs in Triton."""


class Conflict(RegistryError):
    """The request clashes with the registry's current state."""


class PreconditionFailed(RegistryError):
    """A compare-and-swap (``If-Match``) lost."""


class TimedOut(RegistryError):
    """The client took too long: its request stalled (the connection is closed)."""


class ClientClosedRequest(RegistryError):
    """The client went away before its request was answered (nginx's 499): never a 5xx,
    so a client that gives up does not page whoever watches the server's errors."""


class TooLarge(RegistryError):
    """A body or archive over a configured limit."""


class RangeNotSatisfiable(RegistryError):
    """A byte range that starts past the end."""


class Unprocessable(RegistryError):
    """Well-formed, but something it depends on could not be had."""


class NotSupported(RegistryError):
    """A valid request for a feature the registry does not offer."""


class Unavailable(RegistryError):
    """A dependency (database, blob store) cannot be reached; retrying later may succeed."""

    def __init__(self, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


# --- domain errors ---------------------------------------------------------------------


class InvalidCarton(InvalidRequest):
    """The uploaded bytes are not a valid carton (zip, MANIFEST, carton.toml, ...)."""


class ManifestMismatch(InvalidCarton):
    """Bytes do not hash to the sha256 their MANIFEST (or URL) names."""


class ReassemblyMismatch(ManifestMismatch):
    """Chunks named for a file that reassemble to other bytes (``"sha256_mismatch": true``
    in the error body, so a client can tell; what they do hash to is not said: a client
    hashes its own file to tell its user)."""

    details = {"sha256_mismatch": True}


class FilesMissing(InvalidCarton):
    """Files a carton names that are neither in the zip, nor stored, nor linked.

    ``missing`` lists their sha256 (also in the error body): a client that has
    them uploads them and pushes again.
    """

    def __init__(self, message: str, *, missing: list[str]) -> None:
        super().__init__(message)
        self.missing = missing
        self.details = {"missing": missing}


class ChunkMismatch(InvalidRequest):
    """An uploaded chunk whose bytes do not hash to its name."""


class ChunksMissing(InvalidRequest):
    """Chunks a file is assembled from that the registry does not hold (``missing_chunks``)."""

    def __init__(self, message: str, *, missing: list[str]) -> None:
        super().__init__(message)
        self.missing = missing
        self.details = {"missing_chunks": missing}


class InvalidDigest(InvalidRequest):
    """Not a sha256 digest (64 lowercase hex digits)."""


class InvalidName(InvalidRequest):
    """A model name, tag, version or token name outside its documented rules."""


class InvalidReference(InvalidRequest):
    """A reference (hash, ``name``, ``name:version``, ``name@tag``) that cannot be parsed."""


class InvalidBody(InvalidRequest):
    """A JSON or binary request body that does not have the documented shape."""


class InvalidParameter(InvalidRequest):
    """A query parameter (sort, limit, cursor, form) outside its documented values."""


class InvalidScope(InvalidRequest):
    """A token scope that is not one of ``pull``, ``push``, ``delete``, ``admin``."""


class ModelNameRequired(InvalidRequest):
    """A tag was asked for, but the carton has no model name (carton.toml or ``?model=``)."""


class TruncatedUpload(InvalidRequest):
    """The body ended before the ``Content-Length`` it announced."""


class InvalidSelfTest(InvalidRequest):
    """A carton's self test that cannot be sent or checked (no expected_out, a bad tensor)."""


class ModelNotReady(InvalidRequest):
    """A v2 readiness check of a version that is UNAVAILABLE (unloaded, or a blob missing)."""


class ModelLoadFailed(InvalidRequest):
    """A v2 load found versions it cannot serve (a blob missing or of the wrong size)."""


class CartonNotFound(NotFound):
    """No carton with that manifest hash."""


class ModelNotFound(NotFound):
    """No model with that name."""


class NamespaceNotFound(NotFound):
    """No namespace with that name (or none the caller may see)."""


class VersionNotFound(NotFound):
    """The model has no such version."""


class TagNotFound(NotFound):
    """The model has no such tag."""


class TokenNotFound(NotFound):
    """No active token with that id or name."""


class SelfTestNotFound(NotFound):
    """The carton has no self test with that index."""


class AmbiguousReference(Conflict):
    """A manifest-hash prefix that several cartons share."""


class CartonNotRebuildable(Conflict):
    """A stored carton whose MANIFEST cannot be rebuilt into a zip."""


class GcBusy(Conflict):
    """Another garbage collection holds the GC lock."""


class TokenNameTaken(Conflict):
    """An active token already has that name."""


class TagMoved(PreconditionFailed):
    """``If-Match`` named another manifest than the tag points at now (or it points nowhere)."""


class UploadStalled(TimedOut):
    """A request body that sent nothing for ``REGISTRY_BODY_IDLE_TIMEOUT``, or arrived
    slower than ``REGISTRY_BODY_MIN_RATE`` / ``REGISTRY_BODY_DEADLINE_RATE`` allow."""


class UploadAbandoned(ClientClosedRequest):
    """The client closed the connection before its request body was received whole."""


class UploadTooLarge(TooLarge):
    """A request body over its limit (declared or received)."""


class AmplifiedAssembly(TooLarge):
    """A file to assemble from too few distinct chunks for its size (``MAX_ASSEMBLE_RATIO``)."""


class ArchiveTooLarge(TooLarge):
    """An archive over an unpacking limit (members, bytes, compression ratio)."""


class LinkFetchFailed(Unprocessable):
    """A file missing from the zip could not be fetched through LINKS."""


class LinkHostNotAllowed(LinkFetchFailed):
    """A LINKS URL names a host outside ``REGISTRY_LINK_FETCH_ALLOW`` (or a private address)."""


class NotImplementedYet(NotSupported):
    """A part of a protocol the registry does not implement."""


class StorageUnavailable(Unavailable):
    """The database is unreachable, or the blob store holds something other than the index."""


class PushStalled(Unavailable):
    """A push outlived its lease (stalled past ``REGISTRY_LEASE_TIMEOUT``): not indexed."""


class StorageNotReady(Unavailable):
    """The database an operator command names does not exist, or is not migrated to this code."""


class Overloaded(Unavailable):
    """Too much work queued; the client should retry after ``retry_after`` seconds."""
