"""The RegistryError hierarchy: every error a user can cause maps to one HTTP status.

Services raise these; the HTTP layer turns them into ``{"error": message}`` with
``status``; the CLI prints the message and exits non-zero.
"""

from __future__ import annotations


class RegistryError(Exception):
    """Base of every error the registry reports to a client."""

    status: int = 500

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status

    def __str__(self) -> str:
        return self.message


class BadRequest(RegistryError):
    status = 400


class InvalidCarton(BadRequest):
    """The uploaded bytes are not a valid carton (zip, MANIFEST, carton.toml, ...)."""

    status = 400


class DigestMismatch(InvalidCarton):
    """Bytes do not hash to the sha256 they claim."""

    status = 400


class Unauthorized(RegistryError):
    status = 401


class Forbidden(RegistryError):
    status = 403


class NotFound(RegistryError):
    status = 404


class Conflict(RegistryError):
    status = 409


class PreconditionFailed(RegistryError):
    status = 412


class PayloadTooLarge(RegistryError):
    status = 413


class RangeNotSatisfiable(RegistryError):
    status = 416


class UnprocessableLinks(RegistryError):
    """A file missing from the zip could not be fetched through LINKS."""

    status = 422


class NotImplementedYet(RegistryError):
    status = 501


class StorageUnavailable(RegistryError):
    """The blob store or database is unreachable; retrying later may succeed."""

    status = 503
