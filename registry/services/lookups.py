"""Read verbs that open and close their own session, for callers that hold none (HTTP).

Each returns plain values, so no ORM object outlives its session.
"""

from __future__ import annotations

from registry.services import listing, references
from registry.services.context import RegistryContext
from registry.services.namespaces import get_namespace_row


def models_page(
    ctx: RegistryContext,
    *,
    q: str | None = None,
    sort: str = "name",
    limit: int = listing.DEFAULT_PAGE,
    cursor: str | None = None,
    namespace: str | None = None,
) -> listing.ModelPage:
    """One page of the model listing (see ``listing.list_models``)."""
    with ctx.sessions() as session:
        if namespace:
            get_namespace_row(session, namespace)
        return listing.list_models(
            session, q=q, sort=sort, limit=limit, cursor=cursor, namespace=namespace
        )


def version_manifest(ctx: RegistryContext, name: str, version: int) -> str:
    """The manifest hash of version ``version`` of model ``name``."""
    with ctx.sessions() as session:
        return references.resolve_version(session, name, version).manifest_sha256


def tag_manifest(ctx: RegistryContext, name: str, tag: str) -> str:
    """The manifest hash tag ``tag`` of model ``name`` points at."""
    with ctx.sessions() as session:
        return references.resolve_tag(session, name, tag).manifest_sha256
