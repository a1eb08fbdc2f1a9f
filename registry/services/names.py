"""Model names, tags, versions and digests from clients, checked against the one grammar.

The grammar lives in ``registry.carton.names`` (the client parses references with it
too); every verb that takes one of these from a client checks it here, and a client sees
the domain error (``InvalidName``, ``InvalidDigest``) naming the rule it broke.
"""

from __future__ import annotations

from registry.carton import names
from registry.carton.digests import is_sha256
from registry.errors import InvalidDigest, InvalidName

# For the HTTP edge, which routes ``namespace/model`` (``registry.http.namespaces``).
RESERVED_MODEL_WORDS = names.RESERVED_MODEL_WORDS
is_namespace = names.is_namespace


def validate_model_name(name: str) -> str:
    """A full model name: ``model`` or ``namespace/model`` (one level)."""
    if names.is_full_model_name(name):
        return name
    namespace, model = names.split_name(name)
    if namespace and not names.is_namespace(namespace):
        raise InvalidName(f"invalid namespace {namespace!r} in {name!r}: {names.NAMESPACE_RULE}")
    if namespace and model in names.RESERVED_MODEL_WORDS:
        raise InvalidName(
            f"invalid model name {name!r}: inside a namespace a model may not be named "
            f"like a route word ({', '.join(sorted(names.RESERVED_MODEL_WORDS))})"
        )
    raise InvalidName(
        f"invalid model name {name!r}: {names.MODEL_NAME_RULE} "
        "(one '/' may separate a namespace from the model)"
    )


def validate_namespace(name: str) -> str:
    if not names.is_namespace(name):
        raise InvalidName(f"invalid namespace {name!r}: {names.NAMESPACE_RULE}")
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
    return value
