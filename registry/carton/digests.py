"""The one sha256 rule: a digest is 64 lowercase hex digits.

MANIFEST and LINKS name files by it, the blob store names blobs by it, URLs and
references carry it; each of those checks calls ``is_sha256`` (the blob store and the
services wrap it in their own errors).
"""

from __future__ import annotations

import re

SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def is_sha256(value: object) -> bool:
    """True for a lowercase 64-hex-digit sha256 (the only form anything here accepts)."""
    return isinstance(value, str) and SHA256_HEX.fullmatch(value) is not None


def mismatch_message(path: str, actual: str, expected: str) -> str:
    """The one wording of "this file is not what MANIFEST says", wherever it is found."""
    return f"{path}: content hashes to {actual}, but MANIFEST says {expected}"
