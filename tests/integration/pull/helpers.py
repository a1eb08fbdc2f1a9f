"""Helpers for the pull tests: the shared builders and checkers, and pushing over HTTP."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tests.helpers import check_full, check_slim
from tests.helpers import make_carton as build_carton
from tests.helpers import sha as sha256

__all__ = ["check_full", "check_slim", "file_sizes", "make_carton", "push", "sha256"]


def push(client, path_or_bytes: Path | bytes, **params):
    data = path_or_bytes.read_bytes() if isinstance(path_or_bytes, Path) else path_or_bytes
    response = client.post("/api/v1/cartons", content=data, params=params)
    assert response.status_code in (200, 201), response.text
    return response.json()


def make_carton(
    files: Mapping[str, bytes],
    *,
    model_name: str = "pulltest",
    absent: Mapping[str, str] | None = None,
) -> bytes:
    """A carton with an empty tensor index (see ``tests.helpers.make_carton``)."""
    return build_carton(files, model_name=model_name, tensor_index=True, absent=absent)


def file_sizes(client, manifest_sha256: str) -> dict[str, int]:
    meta = client.get(f"/api/v1/cartons/{manifest_sha256}").json()
    return {f["path"]: f["size"] for f in meta["files"]}
