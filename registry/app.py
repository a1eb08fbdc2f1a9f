"""create_app(settings): the Litestar application with every route of DESIGN.md."""

from __future__ import annotations

import logging

from litestar import Litestar, Router
from litestar.datastructures import State
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.types import ControllerRouterHandler

from registry import __version__
from registry.http.api import ApiController
from registry.http.auth import require_pull
from registry.http.chunks import ChunksController
from registry.http.deps import provide_ctx
from registry.http.errors import EXCEPTION_HANDLERS
from registry.http.health import healthz
from registry.http.middleware import middleware
from registry.services.context import RegistryContext
from registry.settings import Settings

log = logging.getLogger("registry")


def route_handlers() -> list[ControllerRouterHandler]:
    """``/healthz`` and ``/metrics`` are anonymous; everything else sits behind ``require_pull``.

    Writes add their stronger guard on the route itself (``registry.http.auth``).
    """
    from registry.http import blobs, cartons, metrics, v2, web

    guarded = Router(
        path="/",
        guards=[require_pull],
        route_handlers=[
            ApiController,
            ChunksController,
            *cartons.ROUTES,
            *blobs.ROUTES,
            *v2.ROUTES,
            *web.ROUTES,
        ],
    )
    return [healthz, *metrics.ROUTES, guarded]


def create_app(settings: Settings | None = None, ctx: RegistryContext | None = None) -> Litestar:
    settings = settings or (ctx.settings if ctx else Settings.from_env())
    shutdown = []
    if ctx is None:
        ctx = RegistryContext.open(settings, migrate=settings.migrate_on_start)
        shutdown.append(ctx.close)  # the app owns only what it opened
    from registry.http.metrics import register_observers

    register_observers(ctx)

    return Litestar(
        route_handlers=route_handlers(),
        dependencies={"ctx": Provide(provide_ctx, sync_to_thread=False)},
        exception_handlers=EXCEPTION_HANDLERS,  # type: ignore[arg-type]
        state=State({"ctx": ctx}),
        on_shutdown=shutdown,
        request_max_body_size=None,
        middleware=middleware(),
        # Logging is the process's business (serve configures it), not the app's: Litestar's
        # default would bind a handler to whatever sys.stderr is at creation.
        logging_config=None,
        openapi_config=OpenAPIConfig(
            title="Carton Registry",
            version=__version__,
            openapi_router=Router(path="/api/openapi", guards=[require_pull], route_handlers=[]),
        ),
    )
