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
(``db.engine``, ``db.migrate``). Nothing else of ours imports it but the script's entry
point (``registry.script``), which ``python -m registry.cli`` (``__main__``) runs as well.
What only some commands need is imported inside them, so ``push`` on a laptop starts fast.

No traceback reaches the user: failures are one ``error:`` line on stderr
(``CARTON_REGISTRY_DEBUG=1`` lets an unexpected error's traceback through).
Exit codes: 0 success, 1 failure, 2 usage error or refusal to start,
130 interrupted (Ctrl-C; no partial file is left), 141 stdout closed early
(``info ... | head``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable

from registry import client as api
from registry.carton.errors import CartonFormatError
from registry.cli.client_commands import Connect, registry_client
from registry.cli.output import Refused, err, fail

INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it
BROKEN_PIPE = 141  # 128 + SIGPIPE
DEBUG_ENV = "CARTON_REGISTRY_DEBUG"  # =1: let an unexpected error's traceback through


# Each module that adds commands, in the order `--help` lists them; True: its commands
# open a client with ``connect``.
GROUPS: tuple[tuple[str, bool], ...] = (
    ("server_commands", False),
    ("client_commands", True),
    ("catalog_commands", True),
    ("lineage_commands", True),
    ("account_commands", True),
    ("namespace_commands", True),
    ("cache_commands", False),
    ("operator_commands", False),
    ("settings_command", False),
)
# Which module adds each command (tests/unit/cli/test_startup.py checks it against GROUPS):
# a command's start builds and imports its own group only. The whole parser, 140 options
# (argparse looks up a translation for each), and the server's modules were a tenth of a
# re-push.
COMMANDS: dict[str, str] = {
    **dict.fromkeys(("serve", "db"), "server_commands"),
    **dict.fromkeys(("push", "pull", "hydrate", "inspect"), "client_commands"),
    **dict.fromkeys(("ls", "info", "versions", "tags", "tag", "untag", "rm"), "catalog_commands"),
    **dict.fromkeys(("diff", "lineage"), "lineage_commands"),
    **dict.fromkeys(("login", "logout", "whoami"), "account_commands"),
    "namespace": "namespace_commands",
    "cache": "cache_commands",
    **dict.fromkeys(("gc", "fsck", "token"), "operator_commands"),
    "settings": "settings_command",
}
_GLOBAL_WITH_VALUE = ("--url", "--token")


def build_parser(
    connect: Connect = registry_client, command: str | None = None
) -> argparse.ArgumentParser:
    """Every command, or only ``command``'s group of them when it is one (the rest are
    neither built nor imported); client commands open their client with ``connect``."""
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
    group = COMMANDS.get(command) if command is not None else None
    for module_name, takes_connect in GROUPS:
        if group is not None and module_name != group:
            continue
        module = importlib.import_module(f"registry.cli.{module_name}")
        if takes_connect:
            module.add_commands(sub, connect)
        else:
            module.add_commands(sub)
    return parser


def command_in(argv: list[str]) -> str | None:
    """The command ``argv`` names (its first word that is neither a global option nor the
    value of one), or None: no command, or an option this cannot read past."""
    words = iter(argv)
    for word in words:
        if word in _GLOBAL_WITH_VALUE:
            next(words, None)
        elif not any(word.startswith(f"{option}=") for option in _GLOBAL_WITH_VALUE):
            return None if word.startswith("-") else word
    return None


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
    except api.ClientError as exc:
        return fail(str(exc) + _auth_hint(args, exc.status))
    except CartonFormatError as exc:
        return fail(exc.message)
    except BrokenPipeError:
        raise
    except OSError as exc:
        return fail(str(exc))
    except Exception as exc:
        # Settings and httpx are imported by the commands that use them, not here (a push
        # reads no REGISTRY_* but its URL, and ``serve`` sends no request): an error of
        # theirs can only come from a command that loaded them.
        settings = sys.modules.get("registry.settings")
        if settings is not None and isinstance(exc, settings.SettingsError):
            # A command that reads REGISTRY_* without its own check.
            return fail(f"bad settings: {exc}", 2)
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
        words = sys.argv[1:] if argv is None else argv
        parser = build_parser(connect, command_in(words))
        if not words:  # no command: say what there is
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
