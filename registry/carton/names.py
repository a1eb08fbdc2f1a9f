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
MAX_TAG_CHARS = 128
MAX_VERSION = 2**31 - 1  # versions are 32-bit integers in the database

# No C0/C1 control characters, no '/' (kept for namespaces), '\', '?', '#', '%' (URL
# syntax), no '@' or ':' (they separate tags and versions in references).
_MODEL_NAME = re.compile(rf"[^\x00-\x1f\x7f-\x9f/\\?#%@:]{{1,{MAX_MODEL_NAME_CHARS}}}")
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
