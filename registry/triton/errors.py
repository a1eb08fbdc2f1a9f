"""Exceptions of the Triton library.

The library is self-contained (no ``registry`` imports), so callers map these to
their own error types.
"""

from __future__ import annotations


class TensorCodecError(ValueError):
    """Malformed tensor data (wrong size, bad datatype, bad shape, bad JSON...)."""
