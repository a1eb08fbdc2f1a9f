"""Every error leaves the server as ``{"error": "<what and why>"}`` with its status."""

from __future__ import annotations

import logging

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException

from registry.errors import RegistryError

log = logging.getLogger("registry.http")


def error_response(request: Request, status: int, message: str) -> Response:
    return Response(
        {"error": message},
        status_code=status,
        media_type=MediaType.JSON,
        headers={"Cache-Control": "no-store"},
    )


def handle_registry_error(request: Request, exc: RegistryError) -> Response:
    return error_response(request, exc.status, exc.message)


def handle_http_exception(request: Request, exc: HTTPException) -> Response:
    message = exc.detail or "error"
    extra = getattr(exc, "extra", None)
    if exc.status_code == 400 and extra:
        message = f"{message}: {extra}"
    response = error_response(request, exc.status_code, str(message))
    if exc.headers:
        response.headers.update(exc.headers)
    return response


def handle_unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(request, 500, f"internal error: {type(exc).__name__}")


EXCEPTION_HANDLERS = {
    RegistryError: handle_registry_error,
    HTTPException: handle_http_exception,
    Exception: handle_unexpected,
}
