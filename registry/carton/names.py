"""The grammar of model names, tags and version numbers (DESIGN.md "Names"), once.

A reference is ``name``, ``name:version`` or ``name@tag``, so a model name may hold
neither ``@`` nor ``:``, and a version is plain decimal digits: with these rules every
name the registry stores can be addressed by a reference. The server (which wraps a
``False`` in ``InvalidName``) and the client (which parses references) both read this
module; like ``digests``, it is pure and imports nothing of ``registry``.
"""

from __future__ import annotations

import re

MAX_MODEL_NAME_CHARS = 255
MAX_NAMESPACE_CHARS = 64
MAX_TAG_CHARS = 128
MAX_VERSION = 2**31 - 1  # versions are 32-bit integers in the database

# No C0/C1 control characters, no '/' (it separates a namespace from the model), no '\',
# '?', '#', '%' (URL syntax), no '@' or ':' (they separate tags and versions in references).
_MODEL_NAME = re.compile(rf"[^\x00-\x1f\x7f-\x9f/\\?#%@:]{{1,{MAX_MODEL_NAME_CHARS}}}")
_NAMESPACE = re.compile(rf"[a-z0-9][a-z0-9._-]{{0,{MAX_NAMESPACE_CHARS - 1}}}")
_TAG = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_TAG_CHARS - 1}}}")
# ASCII digits, no sign, no spaces, no leading zero (versions start at 1): one spelling each.
# At most 19 digits, so reading one never costs a big-integer conversion.
_VERSION = re.compile(r"[1-9][0-9]{0,18}")

MODEL_NAME_RULE = (
    f"1-{MAX_MODEL_NAME_CHARS} characters, no control characters, none of "
    "'/', '\\', '?', '#', '%', '@' or ':', no leading or trailing spaces"
)
TAG_RULE = (
    "letters, digits, '.', '_' and '-', starting with a letter or digit, "
    f"at most {MAX_TAG_CHARS} characters"
)
VERSION_RULE = "plain decimal digits without a leading zero (at most 19)"
NAMESPACE_RULE = (
    f"1-{MAX_NAMESPACE_CHARS} characters of 'a-z', '0-9', '-', '_' and '.', starting with a "
    "letter or digit, not named like a top-level route"
)

# A namespace page is ``/{namespace}``, so a namespace may not be named like a top-level route.
RESERVED_NAMESPACES = frozenset(
    {"api", "blobs", "cartons", "chunks", "healthz", "metrics", "models", "static", "stats", "v2"}
)
# Route words that follow a model name in URLs (``/models/{name}/diff``,
# ``/v2/models/{name}/config``, ``.../versions/{v}``, ``.../tags/{t}``, ...): a model inside
# a namespace may not be named like one, so ``/models/acme/diff`` has one meaning (the
# diff page of root model ``acme``), and ``/models/acme/bert/...`` another.
RESERVED_MODEL_WORDS = frozenset(
    {"config", "diff", "infer", "load", "ready", "self_tests", "tags", "unload", "versions"}
)


def is_namespace(name: object) -> bool:
    """A namespace name (DESIGN.md "Namespaces"); the root namespace has no name."""
    return (
        isinstance(name, str)
        and _NAMESPACE.fullmatch(name) is not None
        and name not in RESERVED_NAMESPACES
    )


def split_name(name: str) -> tuple[str, str]:
    """``(namespace, model)`` of a full model name; the root namespace is ``""``."""
    namespace, slash, model = name.partition("/")
    return (namespace, model) if slash else ("", name)


def is_full_model_name(name: object) -> bool:
    """``model`` (root namespace) or ``namespace/model`` (one level)."""
    if not isinstance(name, str):
        return False
    namespace, model = split_name(name)
    if not namespace:
        return is_model_name(name)
    return is_namespace(namespace) and is_model_name(model) and model not in RESERVED_MODEL_WORDS


def is_model_name(name: object) -> bool:
    """A model name as DESIGN.md "Names" allows it (``.`` and ``..`` are path segments, no)."""
    return (
        isinstance(name, str)
        and _MODEL_NAME.fullmatch(name) is not None
        and name == name.strip()
        and name not in {".", ".."}
    )


def is_tag(tag: object) -> bool:
    """A tag: letters, digits, ``.``, ``_``, ``-``, starting with a letter or digit, <= 128."""
    return isinstance(tag, str) and _TAG.fullmatch(tag) is not None


def parse_version(text: str) -> int | None:
    """The version number ``text`` spells, or None when it is not one (``+1``, `` 1``, ``01``).

    A number above ``MAX_VERSION`` is well-formed: a version no model has.
    """
    return int(text) if _VERSION.fullmatch(text) else None


def names_another_model(named: str | None, given: str | None) -> bool:
    """A push naming ``given`` for a carton whose carton.toml says ``named`` contradicts
    it; ``acme/bert`` for ``bert`` does not (it names the namespace to push into)."""
    if not named or given is None or given == named:
        return False
    return split_name(given)[1] != named


def model_conflict(named: str, given: str) -> str:
    """Why a push naming ``given`` is refused for a carton whose carton.toml says ``named``
    (the client says it before uploading, the registry after: the same words)."""
    return (
        f"carton.toml names the model {named!r}, but the push asked for {given!r} "
        "(--model or ?model=); drop it, or change carton.toml's model_name"
    )
