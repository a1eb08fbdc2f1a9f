"""Transfer commands over the REST API: ``push``, ``pull``, ``hydrate``; and ``inspect``,
which reads a local file and needs no registry.

Each command takes ``connect``, which opens the ``RegistryClient`` it talks
through, so a caller (a test, a script) decides the transport. What every
registry command shares (``Connect``, ``--url``/``--token``, what a REF is) is here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from registry import client as api
from registry.carton.errors import CartonFormatError
from registry.cli.output import (
    HelpFormatter,
    err,
    fail,
    human_bytes,
    print_json,
    transfer_progress,
)

Connect = Callable[[str, str | None], api.RegistryClient]
"""Opens a client for ``(url, token)``; ``RegistryClient`` itself by default."""

REF_HELP = (
    "a manifest hash (also as sha256:HASH, or a unique prefix of 8+ hex digits), "
    "NAME (its 'latest' tag, else its highest version), NAME:VERSION or NAME@TAG"
)
VERDICTS = (400, 413, 422)
"""Statuses by which the registry refuses what was sent: errors that are about the file."""


def cmd_push(args: argparse.Namespace, connect: Connect) -> int:
    path = Path(args.file)
    if not path.is_file():
        return fail(f"{path}: no such file")
    with connect(args.url, args.token) as client, transfer_progress(f"push {path.name}") as bar:

        def on_plan(plan: api.PushPlan) -> None:
            bar.set_total(plan.read_bytes)

        if args.full:
            bar.set_total(path.stat().st_size)
        try:
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
        except api.ClientError as exc:
            if exc.status in VERDICTS:
                raise api.ClientError(f"{path}: {exc.message}", exc.status) from exc
            raise
        except CartonFormatError as exc:  # a member that fails its CRC or size check
            raise api.ClientError(f"{path}: {exc.message}") from exc
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
        sha, _ = api.resolve(client, args.ref)
        if args.output:
            output = Path(args.output)
        else:  # the name a browser saves the web page's download as
            output = Path(client.carton_filename(sha, full=args.full))
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


def cmd_inspect(args: argparse.Namespace) -> int:
    from registry.carton.inspect import inspect_carton

    if not Path(args.file).is_file():
        return fail(f"{args.file}: no such file")
    result = inspect_carton(args.file)
    print_json(result, ensure_ascii=False)
    return 1 if result["problems"] else 0


def client_options() -> argparse.ArgumentParser:
    """--url/--token accepted after the verb too; SUPPRESS keeps the global value otherwise."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--url",
        default=argparse.SUPPRESS,
        help=f"registry base URL (default: $REGISTRY_URL, else {api.DEFAULT_URL})",
    )
    parent.add_argument(
        "--token",
        default=argparse.SUPPRESS,
        help="API token (default: $REGISTRY_TOKEN, else the one `login` saved for the URL)",
    )
    return parent


def add_parser(sub: Any, name: str, summary: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A registry command: --url/--token after the verb, its summary as help and description."""
    kwargs.setdefault("description", summary[0].upper() + summary[1:] + ".")
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        parents=[client_options()],
        help=summary,
        formatter_class=HelpFormatter,
        **kwargs,
    )
    parser.set_defaults(uses_registry=True)
    return parser


def add_commands(sub: Any, connect: Connect) -> None:
    """Add push, pull, hydrate and inspect to the ``carton-registry`` subcommands."""
    p = add_parser(
        sub,
        "push",
        "push a carton, sending only the blobs the registry lacks",
        description=(
            "Push a carton. Asks the registry which files it lacks and uploads only those; "
            "every file in the zip is checked against its MANIFEST sha256 first. Prints the "
            "manifest hash on the last line."
        ),
        epilog="example:\n  carton-registry push model.carton --tag prod",
    )
    p.add_argument("file", metavar="FILE", help="the .carton file")
    p.add_argument("--tag", help="point this tag of the model at the pushed version (e.g. prod)")
    p.add_argument(
        "--model", metavar="NAME", help="model name, for a carton whose carton.toml has none"
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="send the whole file in one request (the registry checks it all)",
    )
    p.set_defaults(func=partial(cmd_push, connect=connect))

    p = add_parser(
        sub,
        "pull",
        "download a carton",
        description=(
            "Download a carton: slim by default (big files stay on the registry, named in "
            "LINKS), or --full with every file inline. The download is verified and appears "
            "only when complete."
        ),
        epilog="examples:\n  carton-registry pull resnet@prod\n"
        "  carton-registry pull resnet:3 --full -o resnet.carton",
    )
    p.add_argument("ref", metavar="REF", help=REF_HELP)
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="where to write it (default: the web download's name, NAME-HASH12[-full].carton)",
    )
    p.add_argument("--full", action="store_true", help="every file inline (no LINKS)")
    p.set_defaults(func=partial(cmd_pull, connect=connect))

    p = add_parser(
        sub,
        "hydrate",
        "turn a slim carton into a full one, fetching its LINKS",
        description=(
            "Write a full carton from a slim one: every file LINKS names is fetched (from "
            "any host) and checked against its sha256. The token is sent only to --url."
        ),
        epilog="example:\n  carton-registry hydrate resnet-3f2a9c1d4e5b.carton -o full.carton",
    )
    p.add_argument("slim", metavar="SLIM", help="the slim .carton file")
    p.add_argument("-o", "--output", metavar="FULL", required=True, help="the full carton to write")
    p.set_defaults(func=cmd_hydrate)

    p = sub.add_parser(
        "inspect",
        help="validate a local carton and describe it (JSON; needs no registry)",
        description=(
            "Validate a local carton and print what it holds as JSON (manifest_sha256, "
            "model_name, runner, inputs, outputs, files, problems). Never fetches LINKS. "
            "Exit status 1 when it has problems."
        ),
    )
    p.add_argument("file", metavar="FILE", help="the .carton file")
    p.set_defaults(func=cmd_inspect)
