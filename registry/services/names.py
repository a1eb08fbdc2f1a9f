"""Model names, tags, versions and digests from clients, checked against the one grammar.

The grammar lives in ``registry.carton.names`` (the client parses references with it
too); every verb that takes one of these from a client checks it here, and a client sees
the domain error (``InvalidName``, ``InvalidDigest``) naming the rule it broke.
"""

from __future__ import annotations

from registry.carton import names
from registry.carton.digests import is_sha256
from registry.errors import InvalidDigest, InvalidName


def validate_model_name(name: str) -> str:
    if not names.is_model_name(name):
        raise InvalidName(f"invalid model name {name!r}: {names.MODEL_NAME_RULE}")
    return name


def validate_tag_name(tag: str) -> str:
    if not names.is_tag(tag):
        raise InvalidName(f"invalid tag {tag!r}: {names.TAG_RULE}")
    return tag


def require_version(text: str) -> int:
    """The version a URL segment or reference spells; ``InvalidName`` unless it is one."""
    number = names.parse_version(text)
    if number is None:
        raise InvalidName(f"invalid model version {text!r}: {names.VERSION_RULE}")
    return number


def parse_version(text: str | None) -> int | None:
    """An optional version (a query parameter or URL segment): None when absent or empty."""
    return None if text is None or text == "" else require_version(text)


def require_sha256(value: object, what: str = "manifest hash") -> str:
    """``value`` if it is a sha256 digest, else ``InvalidDigest`` naming ``what`` it was."""
    if not is_sha256(value):
        raise InvalidDigest(f"invalid {what} {value!r}: expected 64 lowercase hex characters")
    return value  # type: ignore[return-value]
