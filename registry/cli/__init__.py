"""The ``carton-registry`` command line.

What lives here: ``client_commands`` (``push``, ``pull``, ``hydrate`` over the
REST API, ``push DIR`` packing a folder; ``inspect`` for a local file), ``download_commands``
(where ``pull`` and ``hydrate`` write, ``pull REF FILE``), ``catalog_commands`` (``ls``, ``info``,
``versions``, ``tags``, ``tag``, ``untag``, ``rm``), ``lineage_commands`` (``diff``,
``lineage``), ``account_commands``
(``login``, ``logout``, ``whoami``), ``cache_commands`` (``cache ls``, ``cache prune``),
``server_commands`` (``serve``, ``db upgrade``),
``operator_commands`` (``gc``, ``fsck``, ``token``, on the server's storage),
``settings_command`` (``settings``: every ``REGISTRY_*`` setting),
``output`` (stderr messages, tables, progress bars, JSON); and here the parser
built from their parts, and ``main``.

It may import ``registry.client``, ``services/``, ``carton/`` (``inspect``
reads a local file), ``settings``, ``errors``, ``humanize`` (how sizes and ages
read, shared with the web pages) and the blob store's errors (``gc`` and
``fsck`` report them), ``allocator`` (large downloads keep their buffers); ``serve`` and
``db upgrade`` also reach the app factory (``registry.app``), the worker process's setup
(``registry.worker``), the server's options (``http.server``) and the migrations
(``db.engine``, ``db.migrate``). Nothing else of ours imports it. What only some
commands need is imported inside them, so ``push`` on a laptop starts fast.

No traceback reaches the user: failures are one ``error:`` line on stderr
(``CARTON_REGISTRY_DEBUG=1`` lets an unexpected error's traceback through).
Exit codes: 0 success, 1 failure, 2 usage error or refusal to start,
130 interrupted (Ctrl-C; no partial file is left), 141 stdout closed early
(``info ... | head``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from registry import client as api
from registry.carton.errors import CartonFormatError
from registry.cli import (
    account_commands,
    cache_commands,
    catalog_commands,
    client_commands,
    lineage_commands,
    namespace_commands,
    operator_commands,
    server_commands,
    settings_command,
)
from registry.cli.client_commands import Connect, registry_client
from registry.cli.output import Refused, err, fail
from registry.settings import SettingsError

INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it
BROKEN_PIPE = 141  # 128 + SIGPIPE
DEBUG_ENV = "CARTON_REGISTRY_DEBUG"  # =1: let an unexpected error's traceback through


def build_parser(connect: Connect = registry_client) -> argparse.ArgumentParser:
    """Every command; client commands open their client with ``connect``."""
    from registry import __version__

    parser = argparse.ArgumentParser(
        prog="carton-registry",
        description="A content-addressed registry and dedup store for .carton model packages.",
        epilog="`carton-registry COMMAND --help` explains a command. First steps: "
        "`carton-registry serve` in one terminal; `carton-registry push model.carton` "
        "in another.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--url",
        default=None,
        help=f"registry base URL (default: $REGISTRY_URL, else {api.DEFAULT_URL})",
    )
    parser.add_argument(
        "--token",
        default=None,
        help="API token sent as a bearer token (default: $REGISTRY_TOKEN, else the one "
        "`login` saved for the URL)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    server_commands.add_commands(sub)
    client_commands.add_commands(sub, connect)
    catalog_commands.add_commands(sub, connect)
    lineage_commands.add_commands(sub, connect)
    account_commands.add_commands(sub, connect)
    namespace_commands.add_commands(sub, connect)
    cache_commands.add_commands(sub)
    operator_commands.add_commands(sub)
    settings_command.add_commands(sub)
    return parser


def _resolve_token(args: argparse.Namespace) -> None:
    """--token, else $REGISTRY_TOKEN, else the token ``login`` saved for the URL."""
    args.token_source = "--token" if args.token else None
    if args.token:
        return
    args.token = os.environ.get("REGISTRY_TOKEN") or None
    if args.token:
        args.token_source = "REGISTRY_TOKEN"
        return
    if getattr(args, "uses_registry", False):
        from registry.client.credentials import credentials_path, stored_token

        args.token = stored_token(api.check_registry_url(args.url))
        if args.token:
            args.token_source = f"the credentials file {credentials_path()}"


def _auth_hint(args: argparse.Namespace, status: int | None) -> str:
    if status == 401 and args.token_source:
        return f"; the token came from {args.token_source}"
    if status == 401:
        return "; log in with `carton-registry login`, or set REGISTRY_TOKEN"
    return ""


def _run(args: argparse.Namespace) -> int:
    """The command's exit status; what goes wrong is reported in one line."""
    try:
        if getattr(args, "url", None) is None:
            args.url = api.default_url()
        if getattr(args, "uses_registry", False):
            try:
                api.check_registry_url(args.url)
            except api.ClientError as exc:  # a usage error: the command never started
                return fail(str(exc), 2)
        _resolve_token(args)
        func: Callable[[argparse.Namespace], int] = args.func
        return int(func(args) or 0)
    except Refused as exc:
        return fail(str(exc), 2)
    except SettingsError as exc:  # a command that reads REGISTRY_* without its own check
        return fail(f"bad settings: {exc}", 2)
    except api.ClientError as exc:
        return fail(str(exc) + _auth_hint(args, exc.status))
    except CartonFormatError as exc:
        return fail(exc.message)
    except BrokenPipeError:
        raise
    except OSError as exc:
        return fail(str(exc))
    except Exception as exc:
        # httpx is imported by the commands that talk to a registry, not here: ``serve``
        # and the local commands never load it.
        httpx = sys.modules.get("httpx")
        if httpx is not None and isinstance(exc, httpx.HTTPError):
            return fail(f"talking to {args.url}: {type(exc).__name__}: {exc}")
        raise


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so flushing it at exit does not fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # not a real file (captured output in tests)
        pass


def main(argv: list[str] | None = None, *, connect: Connect = registry_client) -> int:
    """Run one command; its exit status (never raises SystemExit)."""
    try:
        parser = build_parser(connect)
        if not (sys.argv[1:] if argv is None else argv):  # no command: say what there is
            parser.print_help()
            sys.stdout.flush()
            return 0
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # usage errors and --help: return instead of exiting
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        else:
            code = _run(args)
        sys.stdout.flush()  # here, where a closed pipe can still be reported quietly
        return code
    except BrokenPipeError:
        _silence_stdout()
        return BROKEN_PIPE
    except KeyboardInterrupt:
        err("interrupted")
        return INTERRUPTED
    except Exception as exc:  # a bug: still one line, unless asked for the traceback
        if os.environ.get(DEBUG_ENV) == "1":
            raise
        return fail(f"unexpected {type(exc).__name__}: {exc} (a bug; {DEBUG_ENV}=1 shows where)")
