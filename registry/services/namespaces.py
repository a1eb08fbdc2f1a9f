"""Namespaces: created by a global admin, public or private (DESIGN.md "Namespaces").

The root namespace has no row: it holds every name without a ``/`` and is public.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.carton.names import split_name
from registry.db.tables import NAMESPACE_VISIBILITIES, Model, Namespace, utcnow
from registry.errors import InvalidBody, NamespaceNotFound, PermissionDenied
from registry.services.access import ROOT, current_access, hidden_namespaces
from registry.services.context import RegistryContext
from registry.services.freshness import bump_generation, wait_for_readers
from registry.services.names import validate_namespace
from registry.services.rendering import iso


def namespace_json(row: Namespace, models: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": row.name,
        "visibility": row.visibility,
        "created_at": iso(row.created_at),
    }
    if models is not None:
        body["models"] = models
    return body


def put_namespace(ctx: RegistryContext, name: str, visibility: str) -> tuple[dict[str, Any], bool]:
    """Create namespace ``name``, or change its visibility; (its JSON, created?).

    Only a global ``admin`` may (the route's guard checks the scope; here, that the
    token is global)."""
    validate_namespace(name)
    if visibility not in NAMESPACE_VISIBILITIES:
        raise InvalidBody(
            f"invalid visibility {visibility!r}: {' or '.join(NAMESPACE_VISIBILITIES)}"
        )
    access = current_access()
    if access.auth != "off" and not access.operator and access.namespaces is not None:
        raise PermissionDenied(
            "only a global admin token (one without --namespace) may create or change namespaces",
            challenge='Bearer realm="carton-registry", error="insufficient_scope", scope="admin"',
        )
    with ctx.transaction() as session:
        row = session.get(Namespace, name, with_for_update=True)
        created = row is None
        if row is None:
            row = Namespace(name=name, visibility=visibility, created_at=utcnow())
            session.add(row)
        changed = not created and row.visibility != visibility
        row.visibility = visibility
        session.flush()
        body = namespace_json(row)
        bump_generation(session)  # every process re-reads which namespaces are private
    ctx.caches.index_changed()
    if changed:
        wait_for_readers(ctx)  # made private: no process serves it as public once we return
    return body, created


def get_namespace_row(session: Session, name: str) -> Namespace:
    """The namespace, or ``NamespaceNotFound`` when it does not exist or is hidden from the
    caller (the same answer)."""
    validate_namespace(name)
    row = session.get(Namespace, name)
    if row is None or name in hidden_namespaces(session):
        raise NamespaceNotFound(f"no namespace named {name!r}")
    return row


def require_namespace(session: Session, model_name: str) -> str:
    """The namespace of a full model name, which must exist and be visible; ``""`` for root."""
    namespace, _ = split_name(model_name)
    if namespace != ROOT:
        get_namespace_row(session, namespace)
    return namespace


def list_namespaces(ctx: RegistryContext) -> list[dict[str, Any]]:
    """The namespaces the caller may see, with their model counts."""
    with ctx.sessions() as session:
        hidden = hidden_namespaces(session)
        counts: dict[str, int] = {
            namespace: int(count)
            for namespace, count in session.execute(
                select(Model.namespace, func.count()).group_by(Model.namespace)
            ).all()
        }
        rows = session.scalars(select(Namespace).order_by(Namespace.name))
        return [
            namespace_json(row, counts.get(row.name, 0)) for row in rows if row.name not in hidden
        ]


def get_namespace(ctx: RegistryContext, name: str) -> dict[str, Any]:
    """One namespace: its visibility and its models' names."""
    with ctx.sessions() as session:
        row = get_namespace_row(session, name)
        names = list(
            session.scalars(select(Model.name).where(Model.namespace == name).order_by(Model.name))
        )
        body = namespace_json(row, len(names))
        body["model_names"] = names
        return body
