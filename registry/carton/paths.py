"""Where things are inside a carton: reserved member names, folders, reference prefixes,
and the rule every member path follows (carton-format-v1.md).

Every layer that names a carton member imports the name from here.
"""

from __future__ import annotations

from .errors import CartonFormatError

MANIFEST_NAME = "MANIFEST"
LINKS_NAME = "LINKS"
CARTON_TOML = "carton.toml"
TENSOR_DIR = "tensor_data/"
TENSOR_INDEX = TENSOR_DIR + "index.toml"
MISC_DIR = "misc/"

# carton.toml refers to tensors and misc files with these prefixes.
TENSOR_REF_PREFIX = "@" + TENSOR_DIR
MISC_REF_PREFIX = "@" + MISC_DIR


def path_problem(path: object) -> str | None:
    """Why ``path`` is not a valid carton member path, or None when it is."""
    if not isinstance(path, str):
        return "path is not a string"
    if path == "":
        return "empty path"
    for ch, what in (
        ("\x00", "NUL"),
        ("\n", "newline"),
        ("\r", "carriage return"),
        ("\\", "backslash"),
    ):
        if ch in path:
            return f"path {path!r} contains a {what}"
    if path.startswith("/"):
        return f"path {path!r} is absolute"
    if path.endswith("/"):
        return f"path {path!r} ends with '/'"
    for seg in path.split("/"):
        if seg == "":
            return f"path {path!r} has an empty segment"
        if seg in (".", ".."):
            return f"path {path!r} has a {seg!r} segment"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return f"path {path!r} is not valid UTF-8"
    return None


def validate_member_path(path: str) -> None:
    """Raise CartonFormatError unless ``path`` is a safe, canonical member path."""
    problem = path_problem(path)
    if problem is not None:
        raise CartonFormatError(problem)
