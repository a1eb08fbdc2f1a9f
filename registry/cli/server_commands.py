"""Server commands: ``serve`` (refusing an open bind without auth) and ``db upgrade``.

Both read ``REGISTRY_*`` settings; uvicorn, the app and the migrations are
imported only when the command runs, so client commands start fast.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import sys
from typing import Any

from registry.cli.output import err, fail
from registry.settings import DEFAULT_PORT, Settings, redact_url


def is_loopback(host: str) -> bool:
    if host.lower() in {"localhost", "localhost.localdomain"}:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def cmd_serve(args: argparse.Namespace) -> int:
    overrides: dict[str, object] = {}
    if not os.environ.get("REGISTRY_PUBLIC_URL"):
        host = f"[{args.host}]" if ":" in args.host and not args.host.startswith("[") else args.host
        overrides["public_url"] = f"http://{host}:{args.port}"
    try:
        settings = Settings.from_env(**overrides)
    except ValueError as exc:
        return fail(f"bad settings: {exc}", 2)
    if not is_loopback(args.host) and settings.auth == "off" and not settings.allow_insecure_bind:
        return fail(
            f"refusing to listen on {args.host} with REGISTRY_AUTH=off: anyone who can "
            "reach it could push and delete. Set REGISTRY_AUTH=write (or all) and create tokens, "
            "or set REGISTRY_ALLOW_INSECURE_BIND=true if this network is trusted.",
            2,
        )

    import uvicorn

    from registry.app import create_app
    from registry.http.server import server_options

    # One JSON line per request on stderr (registry.access); errors with tracebacks.
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    app = create_app(settings)  # migrates under a lock unless REGISTRY_MIGRATE_ON_START=false
    err(f"carton registry on http://{args.host}:{args.port} (public URL {settings.public_url})")
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        proxy_headers=True,
        log_level=args.log_level,
        access_log=False,  # the registry.access JSON lines replace uvicorn's
        log_config=None,
        **server_options(settings),  # keep-alive and header timeouts
    )
    return 0


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    from alembic.runtime.migration import MigrationContext

    from registry.db.engine import make_engine
    from registry.db.migrate import upgrade

    settings = Settings.from_env()
    engine = make_engine(settings.database_url)
    try:
        upgrade(engine)
        with engine.connect() as conn:
            revision = MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
    print(f"database {redact_url(settings.database_url)} at revision {revision}")
    return 0


def add_commands(sub: Any) -> None:
    """Add ``serve`` and ``db`` to the ``carton-registry`` subcommands."""
    storage = (
        "Storage: REGISTRY_DATABASE_URL and REGISTRY_BLOB_STORE, by default registry.db and "
        "blobs/ under REGISTRY_DATA_DIR (./data). The README lists every REGISTRY_* setting."
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
