"""Server commands: ``serve`` (refusing an open bind without auth) and ``db upgrade``.

Both read ``REGISTRY_*`` settings; the ASGI server, the app and the migrations are
imported only when the command runs, so client commands start fast.

``serve --workers N`` (default: 1, see ``DEFAULT_WORKERS``) runs N processes on one socket. The
database is migrated once, before they start; each worker builds the app from the
environment (``registry.worker``, outside this package so that a worker does not import
the command line), where ``serve`` put the public URL. With several
workers, Prometheus metrics go through ``PROMETHEUS_MULTIPROC_DIR`` (a fresh
directory ``serve`` makes and removes, or the operator's, emptied at start), so
``/metrics`` from any worker sums them all. Log records are written by a logging
thread in each process (``registry.worker.configure_logging``), never on the event loop.

The ASGI server is uvicorn (uvloop, httptools), or Granian with ``--server granian``
(``pip install 'carton-registry[granian]'``). ``bench/``'s server figure measures
both on the same app (BENCHMARKS.md, section 5b): they tie on the read path's small
requests, and uvicorn streams a full carton faster, so it is the default. uvicorn
with one worker serves in this process; Granian runs every worker as a child.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import errno
import importlib.util
import ipaddress
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from registry.allocator import keep_freed_memory
from registry.cli.migration import (
    cmd_db_upgrade,
    database_cause,
    migrate_in_child,
)
from registry.cli.output import err, fail
from registry.settings import DEFAULT_PORT, Settings, redact_url
from registry.worker import (
    LOG_LEVEL_ENV,
    SERVER_ENV,
    WORKER_APP,
    configure_logging,
    freeze_startup_objects,
)

SERVERS = ("uvicorn", "granian")
DEFAULT_SERVER = "uvicorn"
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def is_loopback(host: str) -> bool:
    if host.lower() in {"localhost", "localhost.localdomain"}:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# One worker by default, as uvicorn, Granian and gunicorn have it. A push already keeps two
# cores busy from one worker (hashing and cutting run in threads beside the event loop);
# each further worker is another interpreter with its caches, ~100 MiB, and answers more
# small requests at once (BENCHMARKS.md figure 5: 1.1-1.7x with a second on two cores).
# One per core was the default until issue 27: the process tree's peak while moving
# 2 GiB was 290 MiB at two workers against the 200 MiB. `--workers N` scales out.
DEFAULT_WORKERS = 1


def _multiproc_dir() -> str:
    """A directory for the workers' metric files: the operator's (emptied), or a fresh one
    removed at exit."""
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):  # a previous run's counts would be added to ours
            stale.unlink()
        return given
    made = tempfile.mkdtemp(prefix="carton-registry-metrics-")
    atexit.register(shutil.rmtree, made, ignore_errors=True)
    return made


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in ``os.environ`` (which worker processes inherit) while serving."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _run_uvicorn(args: argparse.Namespace, settings: Settings) -> None:
    import uvicorn

    from registry.http.server import server_options

    options: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "proxy_headers": True,
        "log_level": args.log_level,
        "access_log": False,  # the registry.access JSON lines replace uvicorn's
        "log_config": None,
        # keep-alive and header timeouts; workers read theirs from REGISTRY_* themselves
        **server_options(settings, in_process=args.workers == 1),
    }
    if args.workers == 1:
        from registry.app import create_app

        keep_freed_memory()
        configure_logging(args.log_level)
        app = create_app(settings)
        freeze_startup_objects()
        uvicorn.run(app, **options)
    else:
        uvicorn.run(WORKER_APP, factory=True, workers=args.workers, **options)


def _run_granian(args: argparse.Namespace) -> None:
    from granian.constants import Interfaces, Loops  # checked by cmd_serve
    from granian.http import HTTP1Settings
    from granian.server import Server

    Server(
        WORKER_APP,
        factory=True,
        address=args.host,
        port=args.port,
        interface=Interfaces.ASGI,
        workers=args.workers,
        loop=Loops.uvloop,
        http1_settings=HTTP1Settings(header_read_timeout=60_000),  # the most Granian allows
        log_enabled=False,  # the registry.access JSON lines replace Granian's
        respawn_failed_workers=True,
    ).serve()


def _bind_error(host: str, port: int) -> OSError | None:
    """Why ``host:port`` cannot be listened on, tried as uvicorn and Granian bind
    (SO_REUSEADDR); None when it can."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:  # socket.gaierror too
        return exc
    return None


def banner(args: argparse.Namespace, settings: Settings) -> str:
    """What ``serve`` says before it starts: where it listens and what it serves from.

    The data folder is absolute: a server started from another directory would otherwise
    make (and serve) a new, empty ``./data`` without a word.
    """
    data_dir = settings.data_dir.resolve()
    new = "" if data_dir.exists() else " (new: nothing is stored there yet)"
    return (
        f"carton registry on http://{args.host}:{args.port} (public URL {settings.public_url}), "
        f"{args.workers} {args.server} worker(s)\n"
        f"  database     {redact_url(settings.database_url)}\n"
        f"  blob store   {redact_url(settings.blob_store)}\n"
        f"  data folder  {data_dir}{new}"
    )


def cmd_serve(args: argparse.Namespace) -> int:
    overrides: dict[str, object] = {}
    if not os.environ.get("REGISTRY_PUBLIC_URL"):
        host = f"[{args.host}]" if ":" in args.host and not args.host.startswith("[") else args.host
        overrides["public_url"] = f"http://{host}:{args.port}"
    try:
        settings = Settings.from_env(None, **overrides)
    except ValueError as exc:
        return fail(f"bad settings: {exc}", 2)
    if args.workers < 1:
        return fail("--workers must be at least 1", 2)
    if args.server == "granian" and importlib.util.find_spec("granian") is None:
        return fail("--server granian needs Granian: pip install 'carton-registry[granian]'", 2)
    if not is_loopback(args.host) and settings.auth == "off" and not settings.allow_insecure_bind:
        return fail(
            f"refusing to listen on {args.host} with REGISTRY_AUTH=off: anyone who can "
            "reach it could push and delete. Set REGISTRY_AUTH=write (or all) and create tokens, "
            "or set REGISTRY_ALLOW_INSECURE_BIND=true if this network is trusted.",
            2,
        )
    problem = _bind_error(args.host, args.port)
    if problem is not None:
        why = (
            "is in use (is a registry already running?)"
            if problem.errno == errno.EADDRINUSE
            else f"cannot be listened on ({problem.strerror or problem})"
        )
        return fail(f"{args.host}:{args.port} {why}: choose another with --port", 2)
    err(banner(args, settings))
    try:
        _serve(args, settings)
    except Exception as exc:  # migrating, or opening the registry, before serving
        cause = database_cause(exc)
        if cause is None:
            raise
        return fail(f"cannot open database {redact_url(settings.database_url)}: {cause}")
    return 0


def _serve(args: argparse.Namespace, settings: Settings) -> None:
    in_process = args.server == "uvicorn" and args.workers == 1
    worker_env: dict[str, str] = {}
    if not in_process:
        # Workers build their app from the environment: same public URL, migrated once here.
        worker_env.update(
            {
                "REGISTRY_PUBLIC_URL": settings.public_url,
                LOG_LEVEL_ENV: args.log_level,
                SERVER_ENV: args.server,
            }
        )
        if settings.migrate_on_start:
            migrate_in_child(settings)
            worker_env["REGISTRY_MIGRATE_ON_START"] = "false"
        if args.workers > 1:
            worker_env[MULTIPROC_ENV] = _multiproc_dir()
    with _environment(worker_env):
        if args.server == "granian":
            _run_granian(args)
        else:
            _run_uvicorn(args, settings)


def add_commands(sub: Any) -> None:
    """Add ``serve`` and ``db`` to the ``carton-registry`` subcommands."""
    storage = (
        "Storage: REGISTRY_DATABASE_URL and REGISTRY_BLOB_STORE, by default registry.db and "
        "blobs/ under REGISTRY_DATA_DIR (./data). `carton-registry settings` lists every "
        "REGISTRY_* setting, its value here and what it does."
    )
    p = sub.add_parser(
        "serve",
        help="run the registry server (web pages, REST API, Triton v2)",
        description=(
            "Run the registry: web pages at /, the REST API under /api/v1, Triton's v2 "
            "protocol under /v2. Migrates the database on start unless "
            "REGISTRY_MIGRATE_ON_START=false."
        ),
        epilog=storage,
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1; any other needs REGISTRY_AUTH)",
    )
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT})")
    p.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug", "trace"],
        help="server log level (default: info; each request is a JSON line on stderr)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=DEFAULT_WORKERS,
        help=f"worker processes on one socket (default: {DEFAULT_WORKERS}; a push already "
        "uses two cores; each further worker, about 100 MiB more, answers more small "
        "requests at once: one per core for a read-heavy registry)",
    )
    p.add_argument(
        "--server",
        choices=SERVERS,
        default=DEFAULT_SERVER,
        help=f"the ASGI server (default: {DEFAULT_SERVER}; granian needs the granian extra)",
    )
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser(
        "db",
        help="database maintenance (server storage)",
        description="Database maintenance. " + storage,
    )
    dbsub = p.add_subparsers(dest="db_command", metavar="DB_COMMAND", required=True)
    dbsub.add_parser(
        "upgrade",
        help="create the database, or migrate it to this version's schema",
        description="Create the database, or migrate it to this version's schema "
        "(safe while servers run: one migration at a time). " + storage,
    ).set_defaults(func=cmd_db_upgrade)
