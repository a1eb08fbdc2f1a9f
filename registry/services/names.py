"""What a valid model name, tag, version and digest is (DESIGN.md "Names"), checked once.

Every verb that takes one of these from a client checks it here, and a client sees the
domain error (``InvalidName``, ``InvalidDigest``) naming the rule it broke.
"""

from __future__ import annotations

import re

from registry.carton.digests import is_sha256
from registry.errors import InvalidDigest, InvalidName

MAX_VERSION = 2**31 - 1  # versions are 32-bit integers in the database
_MODEL_NAME = re.compile(r"^[^\x00-\x1f\x7f/\\?#%]{1,255}$")
_TAG_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def validate_model_name(name: str) -> str:
    if not _MODEL_NAME.match(name) or name in {".", ".."} or name != name.strip():
        raise InvalidName(
            f"invalid model name {name!r}: 1-255 characters, no control characters, "
            "no '/', '\\', '?', '#' or '%', no leading/trailing spaces"
        )
    return name


def validate_tag_name(tag: str) -> str:
    if not _TAG_NAME.match(tag):
        raise InvalidName(
            f"invalid tag {tag!r}: letters, digits, '.', '_' and '-', starting with a letter "
            "or digit, at most 128 characters"
        )
    return tag


def parse_version(value: str | None) -> int | None:
    """A version number given as text (plain decimal digits); None when absent or empty."""
    if value is None or value == "":
        return None
    if not value.isdigit():
        raise InvalidName(f"invalid version {value!r}: expected a positive integer")
    return int(value)


def require_sha256(value: object, what: str = "manifest hash") -> str:
    """``value`` if it is a sha256 digest, else ``InvalidDigest`` naming ``what`` it was."""
    if not is_sha256(value):
        raise InvalidDigest(f"invalid {what} {value!r}: expected 64 lowercase hex characters")
    return value  # type: ignore[return-value]
