"""Exceptions of the carton format library.

The library is self-contained (no ``registry`` imports), so it raises its own errors.
The services let them through untranslated; the one table at the HTTP edge
(``registry.http.errors.STATUS_BY_ERROR``) maps them: ``CartonLimitExceeded`` is "too
big" (413), any other ``CartonFormatError`` is "invalid content" (400).
"""

from __future__ import annotations


class CartonFormatError(ValueError):
    """The bytes are not a valid carton (zip container, MANIFEST, carton.toml, ...)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class CartonLimitExceeded(CartonFormatError):
    """An archive limit (members, unpacked bytes, ratio, file size) was exceeded."""
