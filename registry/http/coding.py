"""Content coding: ``Accept-Encoding`` negotiation and compressing a body as it streams.

The client's best q-value wins among zstd, br, gzip and deflate; ties prefer
them in that order; an explicit ``identity`` with a higher q wins over them.
Whether a body is worth compressing at all is the service's call
(``registry.services.blob_serving``); this module only speaks the codings.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator

from registry.http.streaming import close_iterator

CODINGS = ("zstd", "br", "gzip", "deflate")  # preference on equal q


def parse_accept_encoding(header: str) -> dict[str, float]:
    """Coding name (lowercase) -> q-value; the first mention of a name counts."""
    prefs: dict[str, float] = {}
    for part in header.split(","):
        name, *params = (p.strip() for p in part.split(";"))
        if not name:
            continue
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = min(1.0, max(0.0, float(value.strip())))
                except ValueError:
                    q = 0.0
        prefs.setdefault(name.lower(), q)
    return prefs


def choose_encoding(header: str | None) -> str | None:
    """The content coding to answer with, or None for identity."""
    if not header:
        return None
    prefs = parse_accept_encoding(header)
    star = prefs.get("*", 0.0)
    best, best_q = None, 0.0
    for coding in CODINGS:
        q = prefs.get(coding)
        if q is None and coding == "gzip":
            q = prefs.get("x-gzip")
        if q is None:
            q = star
        if q > best_q:
            best, best_q = coding, q
    identity_q = prefs.get("identity")
    if best is None or (identity_q is not None and identity_q > best_q):
        return None
    return best


def _compressor(coding: str) -> tuple[Callable[[bytes], bytes], Callable[[], bytes]]:
    if coding == "zstd":
        import zstandard

        z = zstandard.ZstdCompressor(level=3).compressobj()
        return z.compress, z.flush
    if coding == "br":
        import brotli

        b = brotli.Compressor(quality=4)
        return b.process, b.finish
    wbits = 31 if coding == "gzip" else 15  # gzip framing / zlib (RFC 1950) for "deflate"
    c = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return c.compress, c.flush


def compressed(chunks: Iterable[bytes], coding: str) -> Iterator[bytes]:
    """``chunks`` compressed with ``coding`` (one of ``CODINGS``); closes ``chunks`` at the end."""
    compress, flush = _compressor(coding)
    try:
        for chunk in chunks:
            out = compress(chunk)
            if out:
                yield out
        tail = flush()
        if tail:
            yield tail
    finally:
        close_iterator(chunks)
