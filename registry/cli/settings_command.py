"""``carton-registry settings``: every ``REGISTRY_*`` setting with the value this
environment gives it, from the one table (``registry.settings.SETTINGS``).

``--markdown`` prints the table docs/operations.md holds (``scripts/settings_doc.py``
writes it there; a test checks the two agree).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from registry.carton.streams import GiB, KiB, MiB
from registry.cli.output import fail
from registry.humanize import human_bytes
from registry.settings import (
    SETTINGS,
    Setting,
    Settings,
    format_duration,
    parse_duration,
    parse_share,
    redact_url,
)


def show(item: Setting, value: object) -> str:
    """How a setting's value reads: as its variable would be written, sizes also in KiB..."""
    if value is None:
        return "unset"
    if item.secret:
        return "(set, not shown)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if item.parse is parse_duration and isinstance(value, int | float):
        return format_duration(value)
    if item.parse is parse_share and isinstance(value, float):
        return f"{value * 100:g}%"
    if isinstance(value, tuple):
        return ",".join(value) if value else "none"
    if isinstance(value, int) and item.name.endswith("_bytes") and value >= KiB:
        return f"{value} ({_size(value)})"
    if isinstance(value, int) and item.name.endswith("_rate") and value >= KiB:
        return f"{value} ({_size(value)}/s)"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return redact_url(value)
    if isinstance(value, Path) and not value.is_absolute():
        return f"{value.as_posix()} ({value.resolve()})"
    return str(value)


def _size(n: int) -> str:
    """``64 GiB`` when exact, else ``human_bytes``'s rounded spelling."""
    for unit, name in ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if n % unit == 0:
            return f"{n // unit} {name}"
    return human_bytes(n)


def shown_default(item: Setting) -> str:
    return item.shown if item.shown is not None else show(item, item.default)


def markdown_table() -> str:
    """The settings table of docs/operations.md, one row per setting."""
    lines = ["| variable | default | meaning |", "| --- | --- | --- |"]
    for item in SETTINGS:
        default, meaning = (text.replace("|", "\\|") for text in (shown_default(item), item.help))
        lines.append(f"| `{item.env}` | `{default}` | {meaning} |")
    return "\n".join(lines) + "\n"


def cmd_settings(args: argparse.Namespace) -> int:
    if args.markdown:
        print(markdown_table(), end="")
        return 0
    try:
        settings = Settings.from_env()
    except ValueError as exc:
        return fail(f"bad settings: {exc}", 2)
    for item in SETTINGS:
        where = f"  (set here; default {shown_default(item)})" if os.environ.get(item.env) else ""
        print(f"{item.env}={show(item, item.value(settings))}{where}")
        print(f"    {item.help}")
    return 0


def add_commands(sub: Any) -> None:
    """Add ``settings`` to the ``carton-registry`` subcommands."""
    p = sub.add_parser(
        "settings",
        help="list every REGISTRY_* server setting and its value here",
        description="List every REGISTRY_* setting of the server (serve, db, gc, fsck, "
        "token): the value this environment gives it, whether it comes from the "
        "environment (and then its default) and what it does. An empty variable is unset.",
    )
    p.add_argument(
        "--markdown",
        action="store_true",
        help="print the defaults as the Markdown table of docs/operations.md instead",
    )
    p.set_defaults(func=cmd_settings)
