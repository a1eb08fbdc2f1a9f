"""Prometheus metrics: the collectors, helpers the services call, and ``GET /metrics``.

All collectors live in ``REGISTRY`` (one per process, not the global default,
so importing this module twice in tests never registers a name twice). Add
``*metrics.ROUTES`` to the app's route handlers to serve them.

Under ``serve --workers N`` (N > 1) ``PROMETHEUS_MULTIPROC_DIR`` is set before the
workers start: prometheus-client then keeps every counter and histogram in files
there, and ``/metrics``, whichever worker answers it, sums every worker's
(``MultiProcessCollector``). The per-process collectors (CPU, memory, GC) have no
meaningful sum and are left out in that mode.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, TypeVar

from litestar import Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client import (
    GCCollector as _PyGCCollector,
)
from prometheus_client import (
    PlatformCollector as _PlatformCollector,
)
from prometheus_client import (
    ProcessCollector as _ProcessCollector,
)
from prometheus_client.multiprocess import MultiProcessCollector

from registry.http.routing import get

if TYPE_CHECKING:
    from registry.services.context import RegistryContext

REGISTRY = CollectorRegistry(auto_describe=True)
_ProcessCollector(registry=REGISTRY)
_PlatformCollector(registry=REGISTRY)
_PyGCCollector(registry=REGISTRY)

_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)

HTTP_REQUESTS = Counter(
    "registry_http_requests",
    "HTTP requests answered, by method, route template and status",
    ["method", "route", "status"],
    registry=REGISTRY,
)
HTTP_DURATION = Histogram(
    "registry_http_request_duration_seconds",
    "Time from request start to the last response byte, by method and route template",
    ["method", "route"],
    buckets=_DURATION_BUCKETS,
    registry=REGISTRY,
)
HTTP_BYTES_IN = Counter(
    "registry_http_received_bytes",
    "Request body bytes received, by method and route template",
    ["method", "route"],
    registry=REGISTRY,
)
HTTP_BYTES_OUT = Counter(
    "registry_http_sent_bytes",
    "Response body bytes sent, by method and route template",
    ["method", "route"],
    registry=REGISTRY,
)

PUSHES = Counter(
    "registry_pushes",
    "Cartons pushed, by outcome (created: new carton or version; existing: idempotent re-push)",
    ["outcome"],
    registry=REGISTRY,
)
PUSH_BYTES = Counter(
    "registry_push_bytes",
    "Logical bytes of pushed cartons, by kind (new: written to the store; deduplicated)",
    ["kind"],
    registry=REGISTRY,
)
INGEST_DURATION = Histogram(
    "registry_ingest_duration_seconds",
    "Time to verify, store and index one pushed carton (after the upload was spooled)",
    buckets=_DURATION_BUCKETS,
    registry=REGISTRY,
)

GC_RUNS = Counter(
    "registry_gc_runs", "Garbage collections, by outcome", ["outcome"], registry=REGISTRY
)
GC_BLOBS_DELETED = Counter(
    "registry_gc_blobs_deleted", "Blobs deleted by garbage collection", registry=REGISTRY
)
GC_BYTES_FREED = Counter(
    "registry_gc_bytes_freed", "Bytes freed by garbage collection", registry=REGISTRY
)
GC_DURATION = Histogram(
    "registry_gc_duration_seconds",
    "Duration of a garbage collection",
    buckets=_DURATION_BUCKETS,
    registry=REGISTRY,
)
FSCK_PROBLEMS = Counter(
    "registry_fsck_problems",
    "Problems found by fsck, by kind (missing, wrong_size, corrupt)",
    ["kind"],
    registry=REGISTRY,
)

DAMAGED_CHUNKS = Counter(
    "registry_damaged_chunks",
    "Stored chunk copies recorded as damaged, by reason (corrupt, missing) and finder "
    "(read: a verified read refused to serve them; fsck; scrub)",
    ["reason", "found_by"],
    registry=REGISTRY,
)

DAMAGED_BLOBS = Counter(
    "registry_damaged_blobs",
    "Whole blobs (small files stored as one object) recorded as damaged, by reason "
    "(corrupt, wrong_size) and finder (read, fsck)",
    ["reason", "found_by"],
    registry=REGISTRY,
)


_RouteChildren = tuple[Any, Any, Any, dict[int, Any]]
_ROUTE_CHILDREN: dict[tuple[str, str], _RouteChildren] = {}


def observe_request(
    method: str, route: str, status: int, seconds: float, received: int, sent: int
) -> None:
    """Record one HTTP request (the labelled children are looked up once per route)."""
    children = _ROUTE_CHILDREN.get((method, route))
    if children is None:
        children = (
            HTTP_DURATION.labels(method, route),
            HTTP_BYTES_IN.labels(method, route),
            HTTP_BYTES_OUT.labels(method, route),
            {},
        )
        _ROUTE_CHILDREN[(method, route)] = children
    duration, bytes_in, bytes_out, by_status = children
    requests = by_status.get(status)
    if requests is None:
        requests = by_status[status] = HTTP_REQUESTS.labels(method, route, str(status))
    requests.inc()
    duration.observe(seconds)
    if received:
        bytes_in.inc(received)
    if sent:
        bytes_out.inc(sent)


def observe_push(result: Any) -> None:
    """Record one push (a ``registry.services.ingest.PushResult``)."""
    PUSHES.labels("created" if getattr(result, "created", False) else "existing").inc()
    PUSH_BYTES.labels("new").inc(max(0, int(getattr(result, "bytes_new", 0) or 0)))
    PUSH_BYTES.labels("deduplicated").inc(
        max(0, int(getattr(result, "bytes_deduplicated", 0) or 0))
    )
    seconds = getattr(result, "seconds", None)
    if seconds:
        INGEST_DURATION.observe(float(seconds))


def observe_gc(report: Any, outcome: str = "ok") -> None:
    """Record one GC run (a ``registry.services.gc.GcReport``, or None when it failed)."""
    GC_RUNS.labels(outcome).inc()
    if report is None:
        return
    if not getattr(report, "dry_run", False):
        GC_BLOBS_DELETED.inc(report.blobs_deleted)
        GC_BYTES_FREED.inc(report.bytes_freed)
    GC_DURATION.observe(report.duration)


def observe_fsck(report: Any) -> None:
    for kind in ("missing", "wrong_size", "corrupt"):
        count = len(getattr(report, kind, ()) or ())
        if count:
            FSCK_PROBLEMS.labels(kind).inc(count)


def observe_damage(reason: str, found_by: str, count: int) -> None:
    DAMAGED_CHUNKS.labels(reason, found_by).inc(count)


def observe_blob_damage(reason: str, found_by: str, count: int) -> None:
    DAMAGED_BLOBS.labels(reason, found_by).inc(count)


def register_observers(ctx: RegistryContext) -> None:
    """Count this registry's pushes, GC runs, fsck reports and damage (once per context)."""
    observers = ctx.observers
    _subscribe(observers.push, observe_push)
    _subscribe(observers.gc, observe_gc)
    _subscribe(observers.fsck, observe_fsck)
    _subscribe(observers.damage, observe_damage)
    _subscribe(observers.damaged_blobs, observe_blob_damage)


Callback = TypeVar("Callback")


def _subscribe(callbacks: list[Callback], observe: Callback) -> None:
    if observe not in callbacks:
        callbacks.append(observe)


def exposition() -> bytes:
    """Every worker's metrics under ``serve --workers N``, else this process's."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        merged = CollectorRegistry()
        MultiProcessCollector(merged)
        return generate_latest(merged)
    return generate_latest(REGISTRY)


# Litestar adds "; charset=utf-8" to any text/ type: given prometheus_client's, it said it twice.
MEDIA_TYPE = ";".join(p for p in CONTENT_TYPE_LATEST.split(";") if "charset" not in p)


@get(
    "/metrics",
    summary="Prometheus metrics (text exposition format)",
    include_in_schema=False,
    sync_to_thread=True,  # reads every worker's files under serve --workers N
)
def metrics_endpoint() -> Response[bytes]:
    return Response(
        exposition(),
        media_type=MEDIA_TYPE,
        headers={"Cache-Control": "no-store"},
    )


ROUTES: list[Any] = [metrics_endpoint]
