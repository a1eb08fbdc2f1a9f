"""``cache ls`` and ``cache prune``: the local chunk cache that ``pull --full`` and
``hydrate`` fill (``registry.client.ChunkCache``), seen and emptied as ``hf cache scan``
and ``hf cache delete`` do for theirs. Neither talks to a registry."""

from __future__ import annotations

import argparse
from typing import Any

from registry import client as api
from registry.cli.output import HelpFormatter, print_json
from registry.humanize import human_bytes


def cmd_cache_ls(args: argparse.Namespace) -> int:
    cache = api.ChunkCache.default()
    chunks, size = cache.usage()
    if args.json:
        print_json(
            {"path": str(cache.root), "chunks": chunks, "bytes": size, "max_bytes": cache.max_bytes}
        )
        return 0
    print(f"path       {cache.root}")
    print(f"chunks     {chunks}")
    print(f"size       {human_bytes(size)} of at most {human_bytes(cache.max_bytes)}")
    return 0


def cmd_cache_prune(args: argparse.Namespace) -> int:
    cache = api.ChunkCache.default()
    before, _ = cache.usage()
    cap = 0 if args.all else args.max_bytes
    freed = cache.trim(cap)
    after, size = cache.usage()
    print(
        f"removed {before - after} chunk(s), {human_bytes(freed)}; "
        f"{after} left, {human_bytes(size)} ({cache.root})"
    )
    return 0


def add_commands(sub: Any) -> None:
    """Add ``cache ls`` and ``cache prune`` to the subcommands."""
    p = sub.add_parser(
        "cache",
        help="see or empty the local chunk cache (pull --full, hydrate)",
        description="The local chunk cache: " + api.CACHE_WHERE,
        formatter_class=HelpFormatter,
    )
    verbs = p.add_subparsers(dest="cache_command", metavar="VERB", required=True)
    ls = verbs.add_parser("ls", help="where the cache is, how many chunks, how many bytes")
    ls.add_argument("--json", action="store_true", help="print JSON (for scripts)")
    ls.set_defaults(func=cmd_cache_ls)
    prune = verbs.add_parser(
        "prune",
        help="delete the least recently used chunks down to the cap, or --all",
        description="Delete least recently used chunks until the cache holds at most its cap "
        f"(${api.MAX_BYTES_ENV}, default 10 GiB), --max-bytes N, or nothing (--all).",
    )
    which = prune.add_mutually_exclusive_group()
    which.add_argument("--all", action="store_true", help="empty the cache")
    which.add_argument("--max-bytes", type=int, metavar="N", help="keep at most N bytes")
    prune.set_defaults(func=cmd_cache_prune)
