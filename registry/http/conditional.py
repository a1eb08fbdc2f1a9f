"""Conditional and range requests (RFC 9110 §13-14) for immutable, ETagged bodies.

- ``If-None-Match`` (weak comparison, ``*`` matches) -> the caller answers 304;
- one ``bytes=`` range -> 206 with ``Content-Range``; a range starting past the end
  -> 416 with ``Content-Range: bytes */size``; anything else in ``Range`` (other
  units, several ranges, malformed) is ignored and the whole body is sent (200),
  as HTTP allows;
- ``If-Range`` that is not our strong ETag -> the range is ignored.

Pure helpers over headers: no I/O, no services.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from litestar import Request, Response

from registry.errors import RangeNotSatisfiable
from registry.http.errors import handle_registry_error

IMMUTABLE = "public, max-age=31536000, immutable"

DIGITS = re.compile(r"[0-9]+")


class Unsatisfiable(Exception):
    """The one range asked for starts at or past the end of the body."""


# Past any body's size (sizes fit in 63 bits); what a longer number is taken for.
BEYOND_ANY_SIZE = 10**19


def _number(digits: str) -> int:
    """A run of decimal digits as an int, never converting thousands of them."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) < 20 else BEYOND_ANY_SIZE


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """One ``bytes=`` range as half-open ``(start, end)``; None to answer the whole body.

    Malformed headers, other units and multiple ranges are ignored (None).
    ``Unsatisfiable`` when the range starts past the end (or the body is empty).
    """
    if not header:
        return None
    unit, sep, spec = header.partition("=")
    if not sep or unit.strip().lower() != "bytes":
        return None
    specs = [s.strip() for s in spec.split(",") if s.strip()]
    if len(specs) != 1:
        return None
    first, dash, last = specs[0].partition("-")
    first, last = first.strip(), last.strip()
    if not dash:
        return None
    if not first:
        if not DIGITS.fullmatch(last):
            return None
        n = _number(last)
        if n == 0 or size == 0:
            raise Unsatisfiable
        return max(0, size - n), size
    if not DIGITS.fullmatch(first) or (last and not DIGITS.fullmatch(last)):
        return None
    start = _number(first)
    if last and _number(last) < start:
        return None
    if start >= size:
        raise Unsatisfiable
    end = size if not last else min(_number(last) + 1, size)
    return start, end


def _etag_list(header: str) -> list[str]:
    out = []
    for item in header.split(","):
        item = item.strip()
        if item.startswith("W/"):
            item = item[2:]
        if item:
            out.append(item)
    return out


def not_modified(request: Request, etag: str) -> bool:
    """``If-None-Match`` (weak comparison) matches ``etag``."""
    header = request.headers.get("if-none-match")
    if not header:
        return False
    tags = _etag_list(header)
    return "*" in tags or etag in tags


def range_applies(request: Request, etag: str) -> bool:
    """False when ``If-Range`` is present and is not our (strong) ETag."""
    if_range = request.headers.get("if-range")
    return if_range is None or if_range.strip() == etag


@dataclass(frozen=True)
class ByteSpan:
    """The half-open part ``[start, end)`` of a ``size``-byte body to send.

    ``partial`` when it answers a range (206), even one that covers the whole body.
    """

    start: int
    end: int
    size: int
    partial: bool

    @property
    def status(self) -> int:
        return 206 if self.partial else 200

    def headers(self) -> dict[str, str]:
        headers = {"Content-Length": str(self.end - self.start)}
        if self.partial:
            headers["Content-Range"] = f"bytes {self.start}-{self.end - 1}/{self.size}"
        return headers


def requested_span(request: Request, etag: str, size: int) -> ByteSpan:
    """The span to send: the one range asked for when it applies, else the whole body.

    Raises ``Unsatisfiable`` for a range that starts past the end.
    """
    span = parse_range(request.headers.get("range"), size) if range_applies(request, etag) else None
    start, end = span or (0, size)
    return ByteSpan(start, end, size, partial=span is not None)


def range_not_satisfiable(request: Request, size: int, what: str) -> Response:
    """The 416 answer (through the one error path), with ``Content-Range: bytes */size``."""
    asked = request.headers.get("range")
    error = RangeNotSatisfiable(f"range {asked!r} not satisfiable: {what} is {size} bytes")
    response = handle_registry_error(request, error)
    response.headers["Content-Range"] = f"bytes */{size}"
    return response
