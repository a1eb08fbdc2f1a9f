"""Diff and lineage over the REST API (``GET /api/v1/diff``, ``.../cartons/{sha}/lineage``)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from registry.client.transport import RegistryClient


def get_diff(
    client: RegistryClient, from_ref: str, to_ref: str, *, exact: bool = False
) -> dict[str, Any]:
    """What changed from ``from_ref`` to ``to_ref`` (any references; the registry resolves
    them as ``resolve`` does)."""
    params: dict[str, str] = {"from": from_ref, "to": to_ref}
    if exact:
        params["exact"] = "true"
    body: dict[str, Any] = client.request("GET", "/api/v1/diff", params=params).json()
    return body


def get_lineage(client: RegistryClient, manifest_sha256: str) -> dict[str, Any]:
    """The parent and children of a carton, by manifest hash (or a unique prefix)."""
    path = f"/api/v1/cartons/{quote(manifest_sha256, safe=':')}/lineage"
    body: dict[str, Any] = client.request("GET", path).json()
    return body
