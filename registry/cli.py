"""The ``carton-registry`` command line.

Server side: ``serve``, ``db upgrade`` (and the ops verbs of ``registry.cli_ops``
when present: ``gc``, ``fsck``, ``token``). Client side, over the REST API
(``registry.client``): ``push``, ``pull``, ``hydrate``, ``ls``, ``info``; and
``inspect`` for a local file. Exit codes: 0 success, 1 failure, 2 usage error
or refusal to start.
"""

from __future__ import annotations

import argparse
import importlib
import ipaddress
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from registry import client as api
from registry.carton.errors import CartonFormatError
from registry.settings import DEFAULT_PORT, Settings

KEEP_ALIVE_SECONDS = 75  # above the 60 s idle timeout of common load balancers


# -- output helpers -------------------------------------------------------------------


def err(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


@contextmanager
def transfer_progress(description: str, total: int | None = None) -> Iterator[Any]:
    """A rich progress bar on stderr (hidden when stderr is not a terminal).

    Yields an object with ``advance(n)`` and ``set_total(n)``.
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    enabled = sys.stderr.isatty()
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=not enabled,
        transient=False,
    )

    class Bar:
        def __init__(self) -> None:
            self.task = progress.add_task(description, total=total)

        def advance(self, n: int) -> None:
            progress.advance(self.task, n)

        def set_total(self, n: int | None) -> None:
            progress.update(self.task, total=n)

    with progress:
        yield Bar()


def client_from(args: argparse.Namespace) -> api.RegistryClient:
    return api.RegistryClient(args.url, args.token)


# -- client verbs ---------------------------------------------------------------------


def cmd_push(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        err(f"error: {path}: no such file")
        return 1
    with client_from(args) as client, transfer_progress(f"push {path.name}") as bar:

        def on_plan(plan: api.PushPlan) -> None:
            bar.set_total(plan.upload_bytes)

        if args.full:
            bar.set_total(path.stat().st_size)
        outcome = api.push_carton(
            client,
            path,
            model=args.model,
            tag=args.tag,
            full=args.full,
            on_plan=on_plan,
            on_local_error=lambda why: err(
                f"note: {path} could not be read locally ({why}); sending it whole"
            ),
            progress=bar.advance,
        )
    r = outcome.response
    name = r.get("model_name")
    label = f"{name} version {r.get('version')}" if name else "unnamed carton"
    # Blobs uploaded before the POST are new to the registry, though the POST found them stored.
    total = int(r.get("bytes_total") or 0)
    new = min(total, int(r.get("bytes_new") or 0) + outcome.uploaded_bytes)
    print(f"pushed {label}" + ("" if new else " (nothing new)"))
    print(
        f"files: {r.get('files')}, {human_bytes(total)} in all: "
        f"{human_bytes(new)} new, {human_bytes(total - new)} deduplicated"
    )
    if outcome.full:
        print(f"sent the whole file ({human_bytes(path.stat().st_size)})")
    else:
        line = (
            f"uploaded {outcome.uploaded_blobs} blob(s), {human_bytes(outcome.uploaded_bytes)}; "
            f"{outcome.already_stored} already in the registry"
        )
        if outcome.linked:
            line += f"; {len(outcome.linked)} fetched by the registry through LINKS"
        print(line)
    if args.tag:
        print(f"tagged {args.tag}")
    print(outcome.manifest_sha256)
    return 0


def cmd_pull(args: argparse.Namespace) -> int:
    with client_from(args) as client:
        sha, name = api.resolve(client, args.ref)
        output = Path(args.output) if args.output else Path(f"{name or sha}.carton")
        with transfer_progress(f"pull {output.name}") as bar:
            written = api.pull_carton(
                client,
                sha,
                output,
                full=args.full,
                on_start=bar.set_total,
                progress=bar.advance,
            )
    form = "full" if args.full else "slim"
    print(f"wrote {output} ({form}, {human_bytes(written)}), manifest {sha}")
    print(sha)
    return 0


def cmd_hydrate(args: argparse.Namespace) -> int:
    with transfer_progress(f"hydrate {Path(args.slim).name}") as bar:
        sha = api.hydrate_carton(
            args.slim,
            args.output,
            token=args.token,
            registry_url=args.url,
            on_fetch=lambda path, url: err(f"fetched {path} from {url}"),
            progress=bar.advance,
        )
    print(f"wrote {args.output}, manifest {sha}")
    print(sha)
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    with client_from(args) as client:
        models = list(client.list_models(args.q))
    if args.json:
        print(json.dumps(models, indent=2))
        return 0
    table = Table(box=None, pad_edge=False)
    for column in ("name", "latest", "runner", "size", "updated"):
        table.add_column(column, justify="right" if column in ("latest", "size") else "left")
    for m in models:
        table.add_row(
            m["name"],
            str(m.get("latest_version", "")),
            m.get("runner_name") or "",
            human_bytes(m.get("bytes_total")),
            (m.get("updated_at") or "")[:19].replace("T", " "),
        )
    console = Console(width=None if sys.stdout.isatty() else 200, soft_wrap=True)
    console.print(table)
    if not models:
        err("no models" + (f" match {args.q!r}" if args.q else ""))
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    with client_from(args) as client:
        sha, name = api.resolve(client, args.ref)
        info: dict[str, Any] = client.get_carton(sha)
        if name is not None:
            model = client.get_model(name)
            info["model"] = {
                "name": model["name"],
                "versions": model.get("versions", []),
                "tags": model.get("tags", {}),
            }
    print(json.dumps(info, indent=2, ensure_ascii=False))
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from registry.carton.inspect import inspect_carton

    if not Path(args.file).is_file():
        err(f"error: {args.file}: no such file")
        return 1
    result = inspect_carton(args.file)
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 1 if result["problems"] else 0


# -- server verbs ---------------------------------------------------------------------


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
        err(f"error: bad settings: {exc}")
        return 2
    if not is_loopback(args.host) and settings.auth == "off" and not settings.allow_insecure_bind:
        err(
            f"error: refusing to listen on {args.host} with REGISTRY_AUTH=off: anyone who can "
            "reach it could push and delete. Set REGISTRY_AUTH=write (or all) and create tokens, "
            "or set REGISTRY_ALLOW_INSECURE_BIND=true if this network is trusted."
        )
        return 2

    import uvicorn

    from registry.app import create_app

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
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        log_level=args.log_level,
        access_log=False,  # the registry.access JSON lines replace uvicorn's
        log_config=None,
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
    print(f"database at revision {revision}")
    return 0


# -- parser ---------------------------------------------------------------------------


def _client_options() -> argparse.ArgumentParser:
    """--url/--token accepted after the verb too; SUPPRESS keeps the global value otherwise."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--url", default=argparse.SUPPRESS, help="registry base URL")
    parent.add_argument("--token", default=argparse.SUPPRESS, help="API token (bearer)")
    return parent


def add_ops_commands(sub: Any) -> None:
    """``gc``, ``fsck``, ``token``: registered by ``registry.cli_ops`` when it exists."""
    try:
        cli_ops = importlib.import_module("registry.cli_ops")
    except ModuleNotFoundError as exc:
        if exc.name != "registry.cli_ops":
            raise  # a real bug inside cli_ops must not hide the verbs silently
        return
    cli_ops.add_commands(sub)


def build_parser() -> argparse.ArgumentParser:
    from registry import __version__

    parser = argparse.ArgumentParser(
        prog="carton-registry",
        description="A content-addressed registry and dedup store for .carton model packages.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--url",
        default=None,
        help=f"registry base URL (default: $REGISTRY_URL or {api.DEFAULT_URL})",
    )
    parser.add_argument(
        "--token", default=None, help="API token sent as a bearer token (default: $REGISTRY_TOKEN)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = [_client_options()]

    p = sub.add_parser("serve", help="run the registry server")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug", "trace"],
    )
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("db", help="database maintenance")
    dbsub = p.add_subparsers(dest="db_command", metavar="DB_COMMAND", required=True)
    dbsub.add_parser("upgrade", help="run the migrations").set_defaults(func=cmd_db_upgrade)

    p = sub.add_parser("push", parents=common, help="push a carton, sending only missing blobs")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--tag", help="tag to point at the pushed version (e.g. latest)")
    p.add_argument("--model", help="model name when carton.toml has none")
    p.add_argument("--full", action="store_true", help="send the whole file as is")
    p.set_defaults(func=cmd_push)

    p = sub.add_parser("pull", parents=common, help="download a carton")
    p.add_argument("ref", metavar="REF", help="manifest hash, name, name:version or name@tag")
    p.add_argument(
        "-o", "--output", metavar="FILE", help="output file (default: <name or hash>.carton)"
    )
    p.add_argument("--full", action="store_true", help="every file inline (no LINKS)")
    p.set_defaults(func=cmd_pull)

    p = sub.add_parser(
        "hydrate", parents=common, help="turn a slim carton into a full one, resolving LINKS"
    )
    p.add_argument("slim", metavar="SLIM")
    p.add_argument("-o", "--output", metavar="FULL", required=True)
    p.set_defaults(func=cmd_hydrate)

    p = sub.add_parser("ls", parents=common, help="list models")
    p.add_argument("--q", "-q", dest="q", metavar="TEXT", help="search text")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("info", parents=common, help="carton metadata, versions and tags (JSON)")
    p.add_argument("ref", metavar="REF", help="manifest hash, name, name:version or name@tag")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("inspect", help="validate a local carton and describe it (JSON)")
    p.add_argument("file", metavar="FILE")
    p.set_defaults(func=cmd_inspect)

    add_ops_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage errors and --help: return instead of exiting
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if getattr(args, "url", None) is None:
        args.url = api.default_url()
    if getattr(args, "token", None) is None:
        args.token = os.environ.get("REGISTRY_TOKEN") or None
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return int(func(args) or 0)
    except api.ClientError as exc:
        err(f"error: {exc}")
        return 1
    except httpx.HTTPError as exc:
        err(f"error: talking to {args.url}: {type(exc).__name__}: {exc}")
        return 1
    except CartonFormatError as exc:
        err(f"error: {exc.message}")
        return 1
    except OSError as exc:
        err(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        err("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
