"""The one sha256 rule: a digest is 64 lowercase hex digits.

MANIFEST and LINKS name files by it, the blob store names blobs by it, URLs and
references carry it; each of those checks calls ``is_sha256`` (the blob store and the
services wrap it in their own errors).
"""

from __future__ import annotations

import re
from typing import TypeGuard

SHA256_HEX = re.compile(r"[0-9a-f]{64}")
DIGEST_SCHEME = "sha256:"
"""How a reference names a digest explicitly: ``sha256:<hex>`` (as OCI references do)."""
MIN_PREFIX = 8
"""The fewest leading hex digits that may name a manifest (docker shows ids as 12)."""
_HEX_PREFIX = re.compile(rf"[0-9a-f]{{{MIN_PREFIX},63}}")


def is_sha256(value: object) -> TypeGuard[str]:
    """True for a lowercase 64-hex-digit sha256 (the only form anything here accepts)."""
    return isinstance(value, str) and SHA256_HEX.fullmatch(value) is not None


def is_hash_prefix(value: str) -> bool:
    """True for the start of a digest, long enough to name one (``MIN_PREFIX`` to 63 digits)."""
    return _HEX_PREFIX.fullmatch(value) is not None


def mismatch_message(path: str, actual: str, expected: str) -> str:
    """The one wording of "this file is not what MANIFEST says", wherever it is found."""
    return f"{path}: content hashes to {actual}, but MANIFEST says {expected}"
