"""The ``carton-registry`` command line.

What lives here: ``client_commands`` (``push``, ``pull``, ``hydrate``, ``ls``,
``info`` over the REST API; ``inspect`` for a local file), ``server_commands``
(``serve``, ``db upgrade``), ``operator_commands`` (``gc``, ``fsck``,
``token``), ``output`` (stderr messages, sizes, progress bars, JSON); and
here the parser built from their parts, and ``main``.

It may import ``registry.client``, ``services/``, ``carton/`` (``inspect``
reads a local file), ``settings``, ``errors`` and the blob store's errors (``gc``
and ``fsck`` report them); ``serve`` and ``db upgrade`` also reach the app factory
(``registry.app``), the server's options (``http.server``) and the migrations (``db.engine``, ``db.migrate``). Nothing else
of ours imports it. What only some commands need is imported inside them, so
``push`` on a laptop starts fast.

Exit codes: 0 success, 1 failure, 2 usage error or refusal to start.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import httpx

from registry import client as api
from registry.carton.errors import CartonFormatError
from registry.cli import client_commands, operator_commands, server_commands
from registry.cli.client_commands import Connect
from registry.cli.output import err, fail


def build_parser(connect: Connect = api.RegistryClient) -> argparse.ArgumentParser:
    """Every command; client commands open their client with ``connect``."""
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
    server_commands.add_commands(sub)
    client_commands.add_commands(sub, connect)
    operator_commands.add_commands(sub)
    return parser


def main(argv: list[str] | None = None, *, connect: Connect = api.RegistryClient) -> int:
    """Run one command; its exit status (never raises SystemExit)."""
    parser = build_parser(connect)
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
        return fail(str(exc))
    except httpx.HTTPError as exc:
        return fail(f"talking to {args.url}: {type(exc).__name__}: {exc}")
    except CartonFormatError as exc:
        return fail(exc.message)
    except OSError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        err("interrupted")
        return 130
