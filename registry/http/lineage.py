"""Diff and lineage under /api/v1 (DESIGN.md "Lineage and diff"): thin, typed, threaded.

- ``GET /api/v1/diff?from=REF&to=REF[&exact=1]``: what changed between two cartons;
- ``GET /api/v1/cartons/{sha256}/lineage``: a carton's parent and children.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

import anyio.to_thread
import msgspec
from litestar import Controller
from litestar.params import QueryParameter

from registry.http.routing import get
from registry.http.schemas import Body, as_body
from registry.services import diff, lineage
from registry.services.context import RegistryContext


class DiffSide(Body):
    sha256: str
    size: int | None


class TensorChange(Body):
    name: str
    status: str
    dtype: str
    shape: list[int]
    from_dtype: str | None = None
    from_shape: list[int] | None = None


class FileChange(Body):
    path: str
    status: str
    from_: DiffSide | None = msgspec.field(name="from")
    to: DiffSide | None
    bytes_shared: int
    tensors: list[TensorChange] | None
    renamed_from: str | None = None
    renamed_to: str | None = None


class TomlChange(Body):
    from_: Any = msgspec.field(name="from")
    to: Any = None


class DiffSummary(Body):
    added: int
    removed: int
    changed: int
    same: int


class CartonDiff(Body):
    from_: str = msgspec.field(name="from")
    to: str
    exact: bool
    summary: DiffSummary
    files: list[FileChange]
    bytes_shared: int
    bytes_changed: int
    toml: dict[str, TomlChange]


class LineageEntry(Body):
    manifest_sha256: str
    model_name: str | None
    version: int | None
    bytes_shared: int
    share: float


class Lineage(Body):
    manifest_sha256: str
    parent: LineageEntry | None
    children: list[LineageEntry]
    children_truncated: bool


class LineageController(Controller):
    path = "/api/v1"
    tags = ["api"]

    @get(
        "/diff",
        summary="What changed between two cartons",
        description=(
            "`from` and `to`: any reference (manifest hash or unique prefix, `name`, "
            "`name:version`, `name@tag`). Files added, removed, changed or the same, with the "
            "bytes each shares at chunk level; tensors of changed weights files (safetensors, "
            ".npy), compared by chunks, or by their bytes with `exact=1`; carton.toml fields "
            "that differ."
        ),
    )
    async def diff(
        self,
        ctx: RegistryContext,
        from_ref: Annotated[str, QueryParameter(name="from")],
        to_ref: Annotated[str, QueryParameter(name="to")],
        exact: bool = False,
    ) -> CartonDiff:
        result = await anyio.to_thread.run_sync(
            partial(diff.diff_cartons, ctx, from_ref, to_ref, exact=exact)
        )
        return as_body(result, CartonDiff)

    @get(
        "/cartons/{sha256:str}/lineage",
        summary="A carton's closest stored ancestor and its derivatives",
        description=(
            "`sha256`: a manifest hash, `sha256:<hash>`, or a unique prefix of at least 8 hex "
            "digits. The parent is the carton stored before it that shares the most bytes "
            "with it (ties: the older), from the chunk index; `share` is `bytes_shared` over "
            "the bytes of the carton's distinct files."
        ),
    )
    async def lineage(self, ctx: RegistryContext, sha256: str) -> Lineage:
        result = await anyio.to_thread.run_sync(lineage.get_lineage_by_hash, ctx, sha256)
        return as_body(result, Lineage)
