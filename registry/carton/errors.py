"""Exceptions of the carton format library.

The library is self-contained (no ``registry`` imports), so callers map these to
their own error types: ``CartonLimitExceeded`` is "too big" (HTTP 413), any other
``CartonFormatError`` is "invalid content" (HTTP 400).
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
