"""Helpers for the operations tests: the shared builders, and pushing over HTTP."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.helpers import make_carton as build_carton
from tests.helpers import referenced, sha, stored
from tests.rawstore import layout_key, raw_set

__all__ = ["corrupt", "make_carton", "push", "referenced", "sha", "stored"]


def make_carton(
    files: Mapping[str, bytes], *, model_name: str | None = "ops-model", **kw: Any
) -> bytes:
    """A noop carton (see ``tests.helpers.make_carton``), named ``ops-model`` by default."""
    return build_carton(files, model_name=model_name, **kw)


def push(client, data: bytes, **params):
    return client.post("/api/v1/cartons", content=data, params=params)


def corrupt(ctx, digest: str) -> None:
    """Flip one byte of a stored blob in place (same size)."""
    data = bytearray(ctx.blobs.read_bytes(digest))
    data[10] ^= 0xFF
    raw_set(ctx.blobs, layout_key(digest), bytes(data))  # behind the store's back
