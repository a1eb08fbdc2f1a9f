"""LINKS: sha256 -> URLs where a file left out of a slim carton can be fetched."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from .digests import is_sha256
from .errors import CartonFormatError


def _is_http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https")
        and bool(parts.netloc)
        and not any(c in url for c in "\x00\r\n \t")
    )


def parse_links(raw: bytes) -> dict[str, list[str]]:
    """Parse and validate a LINKS file (``version = 1``, ``[urls]`` sha256 -> [urls])."""
    try:
        doc = tomllib.loads(bytes(raw).decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise CartonFormatError(f"LINKS is not valid TOML: {e}") from None
    version = doc.get("version")
    if version != 1 or isinstance(version, bool):
        raise CartonFormatError(f"LINKS: unsupported version {version!r} (expected 1)")
    urls = doc.get("urls", {})
    if not isinstance(urls, dict):
        raise CartonFormatError("LINKS: [urls] must be a table")
    out: dict[str, list[str]] = {}
    for digest, lst in urls.items():
        if not is_sha256(digest):
            raise CartonFormatError(f"LINKS: {digest!r} is not a lowercase hex sha256")
        if not isinstance(lst, list) or not lst:
            raise CartonFormatError(f"LINKS: {digest} must map to a non-empty list of URLs")
        for url in lst:
            if not isinstance(url, str) or not _is_http_url(url):
                raise CartonFormatError(f"LINKS: {digest}: {url!r} is not an http(s) URL")
        out[digest] = list(lst)
    return out


def _toml_str(s: str) -> str:
    """A TOML basic string (JSON-style escapes are valid TOML for these characters)."""
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def write_links(urls: Mapping[str, Sequence[str]]) -> bytes:
    """Deterministic LINKS bytes (sorted hashes), laid out like the reference packer's."""
    lines = ["version = 1", "", "[urls]"]
    for digest in sorted(urls):
        lst = list(urls[digest])
        if not is_sha256(digest):
            raise CartonFormatError(f"LINKS: {digest!r} is not a lowercase hex sha256")
        if not lst or not all(_is_http_url(u) for u in lst):
            raise CartonFormatError(f"LINKS: {digest} needs a non-empty list of http(s) URLs")
        lines.append(f"{digest} = [{', '.join(_toml_str(u) for u in lst)}]")
    return ("\n".join(lines) + "\n").encode("utf-8")
