"""Every error leaves the server as ``{"error": "<what and why>"}`` with its status."""

from __future__ import annotations

import logging

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException
from litestar.types import ExceptionHandlersMap

from registry import errors
from registry.blobstore.errors import (
    BlobDigestMismatch,
    BlobNotFound,
    BlobStoreError,
    BlobStoreUnavailable,
)
from registry.carton.errors import CartonFormatError, CartonLimitExceeded
from registry.services.database_errors import DATABASE_ERRORS, as_registry_error
from registry.triton.errors import TritonFormatError

log = logging.getLogger("registry.http")

CLIENT_CLOSED_REQUEST = 499
"""nginx's status for a client that went away before the answer: logged and counted, never
sent (there is nobody to send it to)."""

# The one table from what went wrong to its HTTP status; the most specific class wins
# (looked up along the exception's MRO).
STATUS_BY_ERROR: dict[type[Exception], int] = {
    errors.InvalidRequest: 400,
    errors.AuthenticationRequired: 401,
    errors.PermissionDenied: 403,
    errors.NotFound: 404,
    errors.Conflict: 409,
    errors.TimedOut: 408,
    errors.PreconditionFailed: 412,
    errors.ClientClosedRequest: CLIENT_CLOSED_REQUEST,
    errors.TooLarge: 413,
    errors.RangeNotSatisfiable: 416,
    errors.Unprocessable: 422,
    errors.NotSupported: 501,
    errors.Unavailable: 503,
    BlobNotFound: 404,
    BlobDigestMismatch: 400,
    BlobStoreUnavailable: 503,
    CartonLimitExceeded: 413,
    CartonFormatError: 400,
    TritonFormatError: 400,
}


def status_of(exc: Exception) -> int:
    """The status ``STATUS_BY_ERROR`` gives ``exc`` (500 for anything it does not list)."""
    for cls in type(exc).__mro__:
        status = STATUS_BY_ERROR.get(cls)
        if status is not None:
            return status
    return 500


_NON_PAGE_PREFIXES = ("/api/", "/v2", "/blobs/", "/metrics", "/healthz", "/static/")


def wants_html(request: Request) -> bool:
    """A browser asking for a page: GET/HEAD outside the API paths, preferring text/html."""
    if request.method not in ("GET", "HEAD"):
        return False
    path = request.url.path
    if path.startswith(_NON_PAGE_PREFIXES) or path == "/api":
        return False
    if path.startswith("/cartons/") and path.endswith(".carton"):
        return False
    if path.startswith("/models/") and path.endswith(".carton"):
        return False
    accept = request.headers.get("accept", "")
    if "text/html" not in accept:
        return False
    try:
        return request.accept.best_match(["application/json", "text/html"]) == "text/html"
    except Exception:
        return False


def error_response(
    request: Request, status: int, message: str, details: dict[str, object] | None = None
) -> Response:
    if wants_html(request):
        try:
            from registry.http.web import render_error_page

            return Response(
                render_error_page(status, message),
                status_code=status,
                media_type=MediaType.HTML,
                headers={"Cache-Control": "no-store"},
            )
        except Exception:  # the page must never hide the error: fall back to JSON
            log.exception("could not render the HTML error page")
    return Response(
        {"error": message, **(details or {})},
        status_code=status,
        media_type=MediaType.JSON,
        headers={"Cache-Control": "no-store"},
    )


def handle_registry_error(request: Request, exc: Exception) -> Response:
    response = error_response(request, status_of(exc), str(exc), getattr(exc, "details", None))
    if isinstance(exc, errors.AuthRefusal) and exc.challenge:
        response.headers["WWW-Authenticate"] = exc.challenge
    if isinstance(exc, errors.Unavailable) and exc.retry_after is not None:
        response.headers["Retry-After"] = str(exc.retry_after)
    if isinstance(exc, errors.TimedOut):  # the rest of a stalled body is not worth waiting for
        response.headers["Connection"] = "close"
    return response


def handle_http_exception(request: Request, exc: HTTPException) -> Response:
    message = exc.detail or "error"
    extra = getattr(exc, "extra", None)
    if exc.status_code == 400 and extra:
        message = f"{message}: {extra}"
    response = error_response(request, exc.status_code, str(message))
    if exc.headers:
        response.headers.update(exc.headers)
    return response


def handle_database_error(request: Request, exc: Exception) -> Response:
    """A lock timeout or an unreachable database: 503 with Retry-After, never a 500."""
    log.warning("database error on %s %s: %s", request.method, request.url.path, exc)
    return handle_registry_error(request, as_registry_error(exc))


def handle_unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(request, 500, f"internal error: {type(exc).__name__}")


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    errors.RegistryError: handle_registry_error,
    CartonFormatError: handle_registry_error,
    TritonFormatError: handle_registry_error,
    BlobStoreError: handle_registry_error,
    HTTPException: handle_http_exception,
    **dict.fromkeys(DATABASE_ERRORS, handle_database_error),
    Exception: handle_unexpected,
}
