"""Exceptions of the Triton library.

The library is self-contained (no ``registry`` imports), so callers map these to
their own error types: any ``TritonFormatError`` is "invalid request" (HTTP 400).
"""

from __future__ import annotations


class TritonFormatError(ValueError):
    """Input that breaks the v2 protocol: a request body, a model config, a header."""


class TensorCodecError(TritonFormatError):
    """Malformed tensor data (wrong size, bad datatype, bad shape, bad JSON...)."""
