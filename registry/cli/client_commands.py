"""Client commands over the REST API: ``push``, ``pull``, ``hydrate``, ``ls``, ``info``;
and ``inspect``, which reads a local file and needs no registry.

Each command takes ``connect``, which opens the ``RegistryClient`` it talks
through, so a caller (a test, a script) decides the transport.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from registry import client as api
from registry.cli.output import err, fail, human_bytes, print_json, transfer_progress

Connect = Callable[[str, str | None], api.RegistryClient]
"""Opens a client for ``(url, token)``; ``RegistryClient`` itself by default."""


def cmd_push(args: argparse.Namespace, connect: Connect) -> int:
    path = Path(args.file)
    if not path.is_file():
        return fail(f"{path}: no such file")
    with connect(args.url, args.token) as client, transfer_progress(f"push {path.name}") as bar:

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


def cmd_pull(args: argparse.Namespace, connect: Connect) -> int:
    with connect(args.url, args.token) as client:
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


def cmd_ls(args: argparse.Namespace, connect: Connect) -> int:
    from rich.console import Console
    from rich.table import Table

    with connect(args.url, args.token) as client:
        models = list(client.list_models(args.q))
    if args.json:
        print_json(models)
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


def cmd_info(args: argparse.Namespace, connect: Connect) -> int:
    with connect(args.url, args.token) as client:
        sha, name = api.resolve(client, args.ref)
        info: dict[str, Any] = client.get_carton(sha)
        if name is not None:
            model = client.get_model(name)
            info["model"] = {
                "name": model["name"],
                "versions": model.get("versions", []),
                "tags": model.get("tags", {}),
            }
    print_json(info, ensure_ascii=False)
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from registry.carton.inspect import inspect_carton

    if not Path(args.file).is_file():
        return fail(f"{args.file}: no such file")
    result = inspect_carton(args.file)
    print_json(result, ensure_ascii=False)
    return 1 if result["problems"] else 0


def _client_options() -> argparse.ArgumentParser:
    """--url/--token accepted after the verb too; SUPPRESS keeps the global value otherwise."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--url", default=argparse.SUPPRESS, help="registry base URL")
    parent.add_argument("--token", default=argparse.SUPPRESS, help="API token (bearer)")
    return parent


def add_commands(sub: Any, connect: Connect) -> None:
    """Add the client commands to the ``carton-registry`` subcommands."""
    common = [_client_options()]

    p = sub.add_parser("push", parents=common, help="push a carton, sending only missing blobs")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--tag", help="tag to point at the pushed version (e.g. latest)")
    p.add_argument("--model", help="model name when carton.toml has none")
    p.add_argument("--full", action="store_true", help="send the whole file as is")
    p.set_defaults(func=partial(cmd_push, connect=connect))

    p = sub.add_parser("pull", parents=common, help="download a carton")
    p.add_argument("ref", metavar="REF", help="manifest hash, name, name:version or name@tag")
    p.add_argument(
        "-o", "--output", metavar="FILE", help="output file (default: <name or hash>.carton)"
    )
    p.add_argument("--full", action="store_true", help="every file inline (no LINKS)")
    p.set_defaults(func=partial(cmd_pull, connect=connect))

    p = sub.add_parser(
        "hydrate", parents=common, help="turn a slim carton into a full one, resolving LINKS"
    )
    p.add_argument("slim", metavar="SLIM")
    p.add_argument("-o", "--output", metavar="FULL", required=True)
    p.set_defaults(func=cmd_hydrate)

    p = sub.add_parser("ls", parents=common, help="list models")
    p.add_argument("--q", "-q", dest="q", metavar="TEXT", help="search text")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=partial(cmd_ls, connect=connect))

    p = sub.add_parser("info", parents=common, help="carton metadata, versions and tags (JSON)")
    p.add_argument("ref", metavar="REF", help="manifest hash, name, name:version or name@tag")
    p.set_defaults(func=partial(cmd_info, connect=connect))

    p = sub.add_parser("inspect", help="validate a local carton and describe it (JSON)")
    p.add_argument("file", metavar="FILE")
    p.set_defaults(func=cmd_inspect)
