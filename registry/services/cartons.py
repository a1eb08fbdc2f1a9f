"""Reading one carton: its row, and its metadata as the API and the pages show it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.carton.config import TensorSpec, parse_carton_toml
from registry.carton.digests import DIGEST_SCHEME, MIN_PREFIX, is_hash_prefix, is_sha256
from registry.db.tables import Carton, Model, Tag, Version
from registry.errors import AmbiguousReference, CartonNotFound, InvalidDigest
from registry.services.access import (
    carton_readable,
    hidden_namespaces,
    readable_carton_condition,
    visible_models,
)
from registry.services.context import RegistryContext
from registry.services.names import require_sha256
from registry.services.rendering import iso


def get_carton_row(session: Session, manifest_sha256: str) -> Carton:
    require_sha256(manifest_sha256)
    carton = session.get(Carton, manifest_sha256)
    if carton is None or not carton_readable(session, manifest_sha256, hidden_namespaces(session)):
        raise CartonNotFound(f"no carton with manifest hash {manifest_sha256}")
    return carton


_CANDIDATES_SHOWN = 5


def find_carton_row(session: Session, ref: str) -> Carton:
    """The carton a manifest hash, ``sha256:<hash>`` or a unique prefix (>= 8 hex) names.

    ``AmbiguousReference`` when the prefix matches several cartons, ``CartonNotFound``
    when none.
    """
    digest = ref.removeprefix(DIGEST_SCHEME)
    if is_sha256(digest):
        return get_carton_row(session, digest)
    if not is_hash_prefix(digest):
        raise InvalidDigest(
            f"invalid manifest hash {ref!r}: expected 64 lowercase hex characters, "
            f"optionally after {DIGEST_SCHEME!r}, or a unique prefix of at least "
            f"{MIN_PREFIX} of them"
        )
    hidden = hidden_namespaces(session)
    query = select(Carton.manifest_sha256).where(Carton.manifest_sha256.startswith(digest))
    if hidden:
        query = query.where(readable_carton_condition(hidden, Carton.manifest_sha256))
    matches = session.scalars(
        query.order_by(Carton.manifest_sha256).limit(_CANDIDATES_SHOWN + 1)
    ).all()
    if not matches:
        raise CartonNotFound(f"no carton's manifest hash starts with {digest}")
    if len(matches) > 1:
        shown = ", ".join(matches[:_CANDIDATES_SHOWN])
        more = ", ..." if len(matches) > _CANDIDATES_SHOWN else ""
        raise AmbiguousReference(
            f"manifest hash prefix {digest} matches several cartons ({shown}{more}); "
            "give more digits"
        )
    return get_carton_row(session, matches[0])


def carton_json(session: Session, carton: Carton) -> dict[str, Any]:
    """Metadata of one carton: parsed carton.toml, files, and where it is versioned/tagged."""
    config = parse_carton_toml(carton.carton_toml)
    query = (
        select(Model.name, Version.version, Version.state, Version.state_reason, Version.id)
        .join(Model, Model.id == Version.model_id)
        .where(Version.manifest_sha256 == carton.manifest_sha256)
        .order_by(Model.name, Version.version)
    )
    shown = visible_models(hidden_namespaces(session))
    if shown is not None:
        query = query.where(shown)
    versions = session.execute(query).all()
    tags_by_version: dict[int, list[str]] = {}
    if versions:
        for tag_name, version_id in session.execute(
            select(Tag.name, Tag.version_id).where(Tag.version_id.in_([v.id for v in versions]))
        ):
            tags_by_version.setdefault(version_id, []).append(tag_name)
    return {
        "manifest_sha256": carton.manifest_sha256,
        # carton.toml's name, else the model it was first pushed under (?model=NAME).
        "model_name": carton.model_name
        or (min(versions, key=lambda v: v.id).name if versions else None),
        "short_description": carton.short_description,
        "description": carton.description,
        "spec_version": carton.spec_version,
        "runner": {
            "runner_name": carton.runner_name,
            "required_framework_version": carton.framework_version,
            "runner_compat_version": carton.runner_compat_version,
            "opts": config.runner.opts,
        },
        "required_platforms": carton.required_platforms,
        "inputs": [_tensor_spec_json(t) for t in config.inputs],
        "outputs": [_tensor_spec_json(t) for t in config.outputs],
        "self_tests": [
            {
                "name": t.name,
                "description": t.description,
                "inputs": t.inputs,
                "expected_out": t.expected_out,
            }
            for t in config.self_tests
        ],
        "examples": [
            {
                "name": e.name,
                "description": e.description,
                "inputs": e.inputs,
                "sample_out": e.sample_out,
            }
            for e in config.examples
        ],
        "carton_toml": carton.carton_toml,
        "files": [{"path": f.path, "sha256": f.blob_sha256, "size": f.size} for f in carton.files],
        "file_count": carton.file_count,
        "bytes_total": carton.total_bytes,
        "created_at": iso(carton.created_at),
        "versions": [
            {
                "model_name": v.name,
                "version": v.version,
                "state": v.state,
                "reason": v.state_reason,
                "tags": sorted(tags_by_version.get(v.id, [])),
            }
            for v in versions
        ],
    }


def _tensor_spec_json(spec: TensorSpec) -> dict[str, Any]:
    shape = spec.shape if isinstance(spec.shape, str) else list(spec.shape)
    return {
        "name": spec.name,
        "dtype": spec.dtype,
        "shape": shape,
        "description": spec.description,
    }


def get_carton(ctx: RegistryContext, ref: str) -> dict[str, Any]:
    """Metadata of the carton ``ref`` names (see ``find_carton_row``)."""
    with ctx.sessions() as session:
        return carton_json(session, find_carton_row(session, ref))
