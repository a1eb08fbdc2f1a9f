"""``namespace create|ls`` and ``whoami`` over the REST API (DESIGN.md "Namespaces").

Namespaces are made by a global ``admin`` token (``PUT /api/v1/namespaces/{ns}``);
``ls`` shows those the caller's token may see. ``whoami`` says what the registry makes
of the token: its scopes, and the namespaces it acts in (none listed: global).
"""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any
from urllib.parse import quote

from registry.cli.client_commands import Connect, add_parser
from registry.cli.output import print_json, print_table


def cmd_namespace_create(args: argparse.Namespace, connect: Connect) -> int:
    visibility = "private" if args.private else "public"
    with connect(args.url, args.token) as client:
        path = f"/api/v1/namespaces/{quote(args.name, safe='')}"
        body = client.request("PUT", path, json={"visibility": visibility}).json()
    if args.json:
        print_json(body)
    else:
        print(f"namespace {body['name']}: {body['visibility']}")
    return 0


def cmd_namespace_ls(args: argparse.Namespace, connect: Connect) -> int:
    with connect(args.url, args.token) as client:
        rows = client.request("GET", "/api/v1/namespaces").json()["namespaces"]
    if args.json:
        print_json(rows)
        return 0
    print_table(
        ("NAMESPACE", "VISIBILITY", "MODELS"),
        [(r["name"], r["visibility"], str(r.get("models", 0))) for r in rows],
        right=("MODELS",),
    )
    return 0


def add_commands(sub: Any, connect: Connect) -> None:
    """Add namespace (create, ls) to the subcommands (``whoami`` is in account_commands)."""
    json_help = "print JSON (for scripts)"
    p = add_parser(
        sub,
        "namespace",
        "create and list namespaces (model names 'namespace/model')",
        epilog="examples:\n  carton-registry namespace create acme --private\n"
        "  carton-registry namespace ls",
    )
    verbs = p.add_subparsers(dest="namespace_command", metavar="{create,ls}")
    verbs.required = True
    create = add_parser(
        verbs,
        "create",
        "create a namespace, or change its visibility (needs a global admin token)",
    )
    create.add_argument("name", metavar="NAME", help="a-z 0-9 - _ . (at most 64)")
    which = create.add_mutually_exclusive_group()
    which.add_argument("--private", action="store_true", help="only its tokens may read it")
    which.add_argument("--public", action="store_true", help="anyone may read it (default)")
    create.add_argument("--json", action="store_true", help=json_help)
    create.set_defaults(func=partial(cmd_namespace_create, connect=connect))
    ls = add_parser(verbs, "ls", "list the namespaces this token may see")
    ls.add_argument("--json", action="store_true", help=json_help)
    ls.set_defaults(func=partial(cmd_namespace_ls, connect=connect))
