"""create_app(settings): the Litestar application with every route of DESIGN.md."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from litestar import HttpMethod, Litestar, Request, Router, route
from litestar.datastructures import State
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin
from litestar.types import ControllerRouterHandler

from registry import __version__
from registry.http.api import ApiController
from registry.http.auth import require_pull
from registry.http.background import background
from registry.http.chunks import ChunksController
from registry.http.deps import provide_ctx
from registry.http.errors import EXCEPTION_HANDLERS
from registry.http.health import healthz
from registry.http.lineage import LineageController
from registry.http.middleware import add_security_headers, middleware
from registry.http.namespaces import AccessMiddleware, NamespacedPaths, NamespacesController
from registry.http.overload import IngestGate, provide_ingest_gate
from registry.services.context import RegistryContext
from registry.settings import Settings

log = logging.getLogger("registry")


class _FreshRouter(Router):
    """A router built for one app and registered once: Litestar deep-copies every Router it
    registers (so one router can serve several apps), which was 40% of building the app
    (~65 ms, paid by every test that makes one). This one is new each time, so its copy
    would be the only user of it: it is registered as it is."""

    def __deepcopy__(self, memo: dict[int, object]) -> _FreshRouter:
        return self


def route_handlers() -> list[ControllerRouterHandler]:
    """``/healthz`` and ``/metrics`` are anonymous; everything else sits behind ``require_pull``.

    Writes add their stronger guard on the route itself (``registry.http.auth``).
    """
    from registry.http import blobs, cartons, metrics, v2, web, web_lineage

    guarded = _FreshRouter(
        path="/",
        guards=[require_pull],
        route_handlers=[
            ApiController,
            ChunksController,
            LineageController,
            NamespacesController,
            *cartons.ROUTES,
            *blobs.ROUTES,
            *v2.ROUTES,
            *web.ROUTES,
            *web_lineage.ROUTES,
        ],
    )
    return [healthz, *metrics.ROUTES, guarded]


class OpenAPIDocument(JsonRenderPlugin):
    """The OpenAPI document as JSON at ``/api/openapi`` and ``/api/openapi/openapi.json``.

    The only OpenAPI rendering served: Litestar's UI pages load their scripts from CDNs
    onto the registry's origin, so there are none (issue 12). HEAD answers too.
    """

    def __init__(self) -> None:
        super().__init__(path=["/", "/openapi.json"])

    def receive_router(self, router: Router) -> None:
        @route(self.paths, http_method=[HttpMethod.HEAD], media_type=self.media_type)
        async def openapi_head(request: Request) -> bytes:
            return self.render(request, request.app.openapi_schema.to_schema())

        router.register(openapi_head)


def create_app(settings: Settings | None = None, ctx: RegistryContext | None = None) -> Litestar:
    settings = settings or (ctx.settings if ctx else Settings.from_env())
    owned = []
    if ctx is None:
        ctx = RegistryContext.open(settings, migrate=settings.migrate_on_start)
        owned.append(ctx.close)  # the app owns only what it opened

    app = Litestar(
        route_handlers=route_handlers(),
        dependencies={
            "ctx": Provide(provide_ctx, sync_to_thread=False),
            "ingest_gate": Provide(provide_ingest_gate, sync_to_thread=False),
        },
        exception_handlers=EXCEPTION_HANDLERS,
        request_max_body_size=None,
        middleware=[AccessMiddleware, *middleware()],
        before_send=[add_security_headers],
        # Logging is the process's business (serve configures it), not the app's: Litestar's
        # default would bind a handler to whatever sys.stderr is at creation.
        logging_config=None,
        openapi_config=OpenAPIConfig(
            title="Carton Registry",
            version=__version__,
            openapi_router=Router(
                path="/api/openapi",
                guards=[require_pull],
                route_handlers=[],
                include_in_schema=False,
            ),
            render_plugins=[OpenAPIDocument()],
        ),
    )
    # Before routing: ``namespace/model`` in model routes (registry.http.namespaces).
    app.asgi_handler = NamespacedPaths(app.asgi_handler)
    return bind_app(app, ctx, settings, close=owned)


def bind_app(
    app: Litestar,
    ctx: RegistryContext,
    settings: Settings | None = None,
    *,
    close: Sequence[Callable[[], None]] = (),
) -> Litestar:
    """Point an app ``create_app`` built at a registry: everything in it that depends on
    ``ctx`` or ``settings`` is set here and nowhere else (state, startup and shutdown hooks,
    observers); routes, handlers and middleware hold none of it. So the test suite can point
    one built app at each test's fresh registry in turn (building one is ~85 ms of Litestar's
    handler registration); ``close`` runs at shutdown, after the background work stops."""
    from registry.http.metrics import register_observers

    settings = settings or ctx.settings
    register_observers(ctx)
    startup, stop_background = background(ctx)
    app.state = State({"ctx": ctx, "ingest_gate": IngestGate.from_settings(settings)})
    app.on_startup = list(startup)
    app.on_shutdown = [*stop_background, *close]
    return app
