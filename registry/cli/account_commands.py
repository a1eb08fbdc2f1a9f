"""``login``, ``logout`` and ``whoami``: the token saved per registry URL
(``registry.client.credentials``), and how the registry sees it.

``login`` checks the token with the registry (``GET /api/v1/whoami``) before saving
it, so a typo fails now rather than at the next push. The token is never printed.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from functools import partial
from typing import Any

from registry import client as api
from registry.cli.client_commands import Connect, add_parser
from registry.cli.output import Refused, err, print_json
from registry.client import credentials

TOKEN_ENV = "REGISTRY_TOKEN"


def _token_to_save(args: argparse.Namespace) -> str:
    if args.token_stdin:
        token = sys.stdin.readline().strip()
    elif args.token_source == "--token":
        token = args.token
    elif sys.stdin.isatty():
        token = getpass.getpass(f"token for {args.url}: ").strip()
    else:
        raise Refused("no token: give --token TOKEN, or pipe it in with --token-stdin")
    if not token:
        raise Refused("the token is empty")
    return str(token)


def _auth_mode(connect: Connect, url: str) -> str | None:
    """The registry's ``REGISTRY_AUTH`` mode, asked without a token (None if it will not say)."""
    try:
        with connect(url, None) as client:
            return str(client.whoami().get("auth"))
    except api.ClientError:
        return None


def cmd_login(args: argparse.Namespace, connect: Connect) -> int:
    token = _token_to_save(args)
    with connect(args.url, token) as client:
        try:
            identity: dict[str, Any] | None = client.whoami()
        except api.ClientError as exc:
            if exc.status == 401 and _auth_mode(connect, args.url) == "off":
                raise api.ClientError(
                    f"the registry at {client.url} has auth off (REGISTRY_AUTH=off): it asks "
                    "for no token and knows none by that value; nothing saved"
                ) from exc
            if exc.status != 404:
                # no status: the token's source needs no hint, it was just given
                raise api.ClientError(
                    f"the registry at {client.url} refuses this token: {exc}"
                ) from exc
            identity = None  # a registry too old to say: save it unchecked
    path = credentials.store_token(args.url, token)
    if identity is None:
        err(f"note: {args.url} cannot check tokens; saved without checking")
    elif identity.get("auth") == "off":
        err(f"note: {args.url} does not ask for tokens (REGISTRY_AUTH=off)")
    if os.environ.get(TOKEN_ENV):
        err(f"note: {TOKEN_ENV} is set, and wins over the saved token while it is")
    scopes = ", ".join(identity.get("scopes", [])) if identity else "unchecked"
    print(f"logged in to {args.url} (scopes: {scopes or 'none'}); token saved in {path}")
    return 0


def cmd_whoami(args: argparse.Namespace, connect: Connect) -> int:
    """How the registry sees the token this command would send: its auth mode, scopes and
    namespaces."""
    with connect(args.url, args.token) as client:
        identity = client.whoami()
    scopes = [str(s) for s in identity.get("scopes", [])]
    if args.json:
        print_json({"url": args.url, **identity, "token_source": args.token_source})
        return 0
    print(f"registry  {args.url} (auth {identity.get('auth')})")
    if args.token:
        print(f"token     from {args.token_source}")
        print(f"scopes    {', '.join(scopes) or 'none'}")
        spaces = identity.get("namespaces")
        print(f"namespaces {', '.join(spaces) if spaces else 'every namespace (global token)'}")
    else:
        print("token     none: anonymous")
    return 0


def cmd_logout(args: argparse.Namespace) -> int:
    if credentials.forget_token(args.url):
        print(f"logged out of {args.url}: token removed from {credentials.credentials_path()}")
    else:
        print(f"not logged in to {args.url}")
    if os.environ.get(TOKEN_ENV):
        err(f"note: {TOKEN_ENV} is still set in this environment")
    return 0


def add_commands(sub: Any, connect: Connect) -> None:
    """Add login, logout and whoami to the subcommands."""
    where = (
        "Tokens are saved per registry URL in carton-registry/credentials.json under the "
        "platform's config folder ($XDG_CONFIG_HOME, ~/.config, or ~/Library/Application "
        f"Support on macOS), readable by you alone. --token and ${TOKEN_ENV} win over it."
    )
    p = add_parser(
        sub,
        "login",
        "check a token with the registry and save it for its URL",
        description="Check a token with the registry, then save it for the registry's URL. "
        "Give it with --token TOKEN, on standard input with --token-stdin, or at the prompt. "
        + where,
        epilog="examples:\n  carton-registry login --url https://registry.example.org\n"
        '  echo "$TOKEN" | carton-registry login --token-stdin',
    )
    p.add_argument("--token-stdin", action="store_true", help="read the token from standard input")
    p.set_defaults(func=partial(cmd_login, connect=connect))

    p = add_parser(
        sub,
        "whoami",
        "the registry's auth mode and the scopes of the token commands send",
        description="Ask the registry (GET /api/v1/whoami) how it sees the token commands "
        "send: its auth mode (off, write, all) and the token's scopes, and where the token "
        "came from (--token, $REGISTRY_TOKEN or `login`). " + where,
    )
    p.add_argument("--json", action="store_true", help="print JSON (for scripts)")
    p.set_defaults(func=partial(cmd_whoami, connect=connect))

    p = add_parser(
        sub,
        "logout",
        "forget the token saved for a registry URL",
        description="Forget the token saved for the registry's URL. " + where,
    )
    p.set_defaults(func=cmd_logout)
