"""Reads answer ``HEAD`` wherever they answer ``GET`` (load balancers probe with it).

``get`` here is Litestar's ``route`` for GET and HEAD: every read route of the
registry is declared with it, so HEAD runs the same handler (same status and
headers, ``Content-Length`` included) and ``middleware.HeadWithoutBody`` drops the
body. Routes whose HEAD must differ from GET (blobs and cartons: no redirect, no
body built) declare a ``head`` handler of their own instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from litestar import HttpMethod, route

READ_METHODS = [HttpMethod.GET, HttpMethod.HEAD]


def get(path: str | Sequence[str] | None = None, **kwargs: Any) -> route:
    """``@get(...)`` that answers HEAD too (Litestar's own ``get`` answers HEAD with 405)."""
    return route(path, http_method=READ_METHODS, **kwargs)
