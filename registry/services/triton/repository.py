"""The model repository extension: index, load and unload.

A load with a config and ``file:<version>/<path>`` parameters builds a carton and
pushes it through the ordinary ingest path; a load without them re-verifies every
version's blobs and marks it READY (or UNAVAILABLE with the reason). An unload
marks versions UNAVAILABLE and deletes nothing.
"""

from __future__ import annotations

import hashlib
import io
from functools import partial
from typing import Any, BinaryIO

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.carton.config import render_carton_toml
from registry.carton.errors import CartonFormatError
from registry.carton.manifest import build_manifest
from registry.carton.paths import MANIFEST_NAME, TENSOR_INDEX, path_problem
from registry.carton.tensor_data import write_tensor_index
from registry.carton.zipformat import STORED
from registry.carton.zipwrite import write_zip
from registry.db.tables import CartonFile, Model, Version
from registry.errors import InvalidBody, ModelLoadFailed, NotImplementedYet
from registry.services import models, references
from registry.services.access import hidden_namespaces, require_write, visible_models
from registry.services.chunkstore.damage import damaged_files
from registry.services.chunkstore.reader import load_files, stored_size
from registry.services.context import RegistryContext
from registry.services.ingest import ingest_file
from registry.services.names import validate_model_name
from registry.services.triton.versions import READY, UNAVAILABLE
from registry.services.uploads import upload_file
from registry.triton.documents import IndexEntry, ModelVersions
from registry.triton.mapping import config_to_carton_doc
from registry.triton.requests import CONFIG_MEMBER, LoadRequest, parse_load_parameters

UNLOADED = "unloaded"  # the reason Triton gives for an unloaded version


def repository_index(ctx: RegistryContext, *, ready_only: bool = False) -> list[IndexEntry]:
    """One entry per model version, ordered by name then version."""
    with ctx.sessions() as session:
        stmt = (
            select(Model.name, Version.version, Version.state, Version.state_reason)
            .join(Version, Version.model_id == Model.id)
            .order_by(Model.name, Version.version)
        )
        if ready_only:
            stmt = stmt.where(Version.state == READY)
        shown = visible_models(hidden_namespaces(session))
        if shown is not None:  # a private namespace's models are not there for outsiders
            stmt = stmt.where(shown)
        return [IndexEntry(n, str(v), s, r or "") for n, v, s, r in session.execute(stmt)]


def unload_model(ctx: RegistryContext, name: str) -> ModelVersions:
    """Every version of ``name`` UNAVAILABLE with reason "unloaded"; nothing is deleted."""
    validate_model_name(name)
    with ctx.transaction() as session:
        model = models.get_model_row(session, name)
        require_write(session, model.namespace, "push", name)
        rows = list(session.scalars(select(Version).where(Version.model_id == model.id)))
        for row in rows:
            row.state = UNAVAILABLE
            row.state_reason = UNLOADED
        return ModelVersions(name, sorted(str(r.version) for r in rows))


def _version_problem(ctx: RegistryContext, session: Session, row: Version) -> str | None:
    """Why a version is not servable (a blob missing or of the wrong size), or None."""
    files = session.execute(
        select(CartonFile.path, CartonFile.blob_sha256)
        .where(CartonFile.manifest_sha256 == row.manifest_sha256)
        .order_by(CartonFile.path)
    ).all()
    stored = load_files(session, {sha for _, sha in files})
    damaged = damaged_files(session, stored)
    seen: dict[str, int | None] = {}
    for path, sha in files:
        if sha not in stored:
            return f"blob {sha} ({path}) has no index row"
        if sha in damaged:
            what = "has damaged chunks" if stored[sha].chunked else "is damaged"
            return f"blob {sha} ({path}) {what} in the blob store (push it again)"
        if sha not in seen:
            seen[sha] = stored_size(ctx.blobs, stored[sha])
        actual, size = seen[sha], stored[sha].size
        if actual is None:
            return f"blob {sha} ({path}) is missing from the blob store"
        if actual != size:
            return f"blob {sha} ({path}) has {actual} bytes in the blob store, expected {size}"
    return None


def reload_model(ctx: RegistryContext, name: str) -> ModelVersions:
    """Load without files: re-verify every version's blobs; READY, or UNAVAILABLE + reason.

    Raises ModelLoadFailed (after recording the states) when any version has a problem.
    """
    validate_model_name(name)
    with ctx.sessions() as session:
        model = models.get_model_row(session, name)
        require_write(session, model.namespace, "push", name)
        rows = list(
            session.scalars(
                select(Version).where(Version.model_id == model.id).order_by(Version.version)
            )
        )
        problems = {r.id: _version_problem(ctx, session, r) for r in rows}
    failed: list[str] = []
    with ctx.transaction() as session:
        for version_id, problem in problems.items():
            row = session.get(Version, version_id)
            if row is None:  # deleted meanwhile
                continue
            if problem is None:
                row.state, row.state_reason = READY, ""
            else:
                row.state, row.state_reason = UNAVAILABLE, problem
                failed.append(f"version {row.version}: {problem}")
    if failed:
        raise ModelLoadFailed(f"failed to load {name!r}: " + "; ".join(failed))
    return ModelVersions(name, [str(r.version) for r in rows])


def build_load_carton(name: str, request: LoadRequest, out: BinaryIO) -> None:
    """Write a carton for a load request (carton.toml, MANIFEST, index.toml, model/...)."""
    assert request.config is not None and request.config_text is not None
    try:
        toml = render_carton_toml(config_to_carton_doc(name, request.config, request.files))
    except CartonFormatError as exc:
        raise InvalidBody(f"config cannot be turned into a carton: {exc.message}") from exc
    members: dict[str, bytes] = {
        "carton.toml": toml,
        TENSOR_INDEX: write_tensor_index([]),
        CONFIG_MEMBER: request.config_text.encode("utf-8"),
    }
    for path, data in request.files.items():
        members[f"model/{path}"] = data
    try:
        manifest = build_manifest(
            (path, hashlib.sha256(data).hexdigest()) for path, data in members.items()
        )
    except CartonFormatError as exc:
        raise InvalidBody(f"invalid file paths: {exc.message}") from exc
    ordered = [(MANIFEST_NAME, manifest.raw), *sorted(members.items())]
    write_zip(
        out,
        [(path, partial(io.BytesIO, data), STORED) for path, data in ordered],
    )


def load_model_with_files(ctx: RegistryContext, name: str, request: LoadRequest) -> dict[str, Any]:
    """Build a carton from config + files and push it through the ordinary ingest path.

    Answers the push's own body (manifest, version, byte counts) plus ``triton_version``,
    the version the file parameters named.
    """
    validate_model_name(name)
    with upload_file(ctx, prefix="upload-v2-") as (path, out):
        build_load_carton(name, request, out)
        result = ingest_file(ctx, path, model_name=name)
    # Loading is also "make it ready": a re-load of an unloaded identical carton revives it.
    if result.version is not None:
        with ctx.transaction() as session:
            row = references.resolve_version(session, name, result.version)
            row.state, row.state_reason = READY, ""
    body = result.as_json()
    body["triton_version"] = request.file_version
    return body


def load_model(
    ctx: RegistryContext, name: str, params: dict[str, Any]
) -> ModelVersions | dict[str, Any]:
    """A load: store a new version (config + files), or re-verify the stored ones."""
    request = parse_load_parameters(params, path_problem=path_problem)
    validate_model_name(name)
    if request.files:
        return load_model_with_files(ctx, name, request)
    if request.config is not None:
        raise NotImplementedYet(
            "loading a new config without model files is not supported: send the model's "
            'files too, as "file:<version>/<path>" parameters'
        )
    return reload_model(ctx, name)
