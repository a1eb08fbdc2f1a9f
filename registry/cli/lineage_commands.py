"""``diff`` and ``lineage``: what changed between two cartons, and where one came from.

Both print for people and take ``--json`` for scripts (the API's body as it is).
"""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from registry import client as api
from registry.cli.client_commands import REF_HELP, Connect, add_parser
from registry.cli.output import print_json, print_table
from registry.humanize import human_bytes, percent

SHORT_HASH = 12
MARKS = {"changed": "~", "added": "+", "removed": "-", "same": "="}


def _shape(shape: list[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _percent(part: int, whole: int) -> str:
    return percent(100.0 * part / whole) if whole else "-"


def _label(entry: dict[str, Any]) -> str:
    name, version = entry.get("model_name"), entry.get("version")
    where = f"{name}:{version}" if name and version else (name or "unnamed")
    return f"{where} ({entry['manifest_sha256'][:SHORT_HASH]})"


def _print_tensors(tensors: list[dict[str, Any]], *, all_tensors: bool) -> None:
    counts = {s: 0 for s in MARKS}
    for t in tensors:
        counts[t["status"]] += 1
    print("    tensors: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    for t in tensors:
        if t["status"] == "same" and not all_tensors:
            continue
        was = ""
        if t.get("from_shape") is not None:
            was = f"  (was {t['from_dtype']} {_shape(t['from_shape'])})"
        print(f"      {MARKS[t['status']]} {t['name']}  {t['dtype']} {_shape(t['shape'])}{was}")


def _size(file: dict[str, Any]) -> int:
    return int((file["to"] or file["from"] or {}).get("size") or 0)


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 200 else text[:199] + "…"


def cmd_diff(args: argparse.Namespace, connect: Connect) -> int:
    with connect(args.url, args.token) as client:
        result = api.get_diff(client, args.from_ref, args.to_ref, exact=args.exact)
    if args.json:
        print_json(result, ensure_ascii=False)
        return 0
    print(f"from {args.from_ref}  {result['from']}")
    print(f"to   {args.to_ref}  {result['to']}")
    summary = result["summary"]
    total = result["bytes_shared"] + result["bytes_changed"]
    print(
        f"files: {summary['changed']} changed, {summary['added']} added, "
        f"{summary['removed']} removed, {summary['same']} same; "
        f"{human_bytes(result['bytes_shared'])} of {human_bytes(total)} shared "
        f"({_percent(result['bytes_shared'], total)}), "
        f"{human_bytes(result['bytes_changed'])} new"
    )
    shown = [f for f in result["files"] if f["status"] != "same" or args.all]
    if shown:
        print()
        print_table(
            ("", "PATH", "SIZE", "SHARED"),
            [
                (
                    MARKS[f["status"]],
                    f["path"]
                    + (f"  (from {f['renamed_from']})" if f.get("renamed_from") else "")
                    + (f"  (to {f['renamed_to']})" if f.get("renamed_to") else ""),
                    human_bytes(_size(f)),
                    f"{human_bytes(f['bytes_shared'])} ({_percent(f['bytes_shared'], _size(f))})",
                )
                for f in shown
            ],
            right=("SIZE",),
        )
    for f in result["files"]:
        if f.get("tensors"):
            print(f"\n  {f['path']}" + ("" if result["exact"] else " (by chunks; --exact hashes)"))
            _print_tensors(f["tensors"], all_tensors=args.all)
    if result["toml"]:
        print("\ncarton.toml:")
        for key, change in result["toml"].items():
            print(f"  {key}:")
            print(f"    - {_value(change['from'])}")
            print(f"    + {_value(change['to'])}")
    return 0


def cmd_lineage(args: argparse.Namespace, connect: Connect) -> int:
    with connect(args.url, args.token) as client:
        sha, _ = api.resolve(client, args.ref)
        result = api.get_lineage(client, sha)
    if args.json:
        print_json(result, ensure_ascii=False)
        return 0
    parent = result.get("parent")
    print(f"carton      {result['manifest_sha256']}")
    if parent:
        print(
            f"derived from {_label(parent)}: shares {percent(100 * parent['share'])} "
            f"({human_bytes(parent['bytes_shared'])})"
        )
    else:
        print("derived from nothing stored (no older carton shares its bytes)")
    children = result.get("children") or []
    if children:
        print(f"\nderivatives ({len(children)}{'+' if result.get('children_truncated') else ''}):")
        print_table(
            ("CARTON", "SHARES", "BYTES"),
            [
                (_label(c), percent(100 * c["share"]), human_bytes(c["bytes_shared"]))
                for c in children
            ],
            right=("SHARES", "BYTES"),
        )
    else:
        print("no derivatives")
    return 0


def add_commands(sub: Any, connect: Connect) -> None:
    """Add diff and lineage to the subcommands."""
    p = add_parser(
        sub,
        "diff",
        "what changed between two cartons: files, bytes shared, tensors, carton.toml",
        description=(
            "Compare two cartons from the registry's index: files added, removed, changed "
            "or the same, the bytes each shares at chunk level, which tensors of changed "
            "weights files (safetensors, .npy) changed, were added or removed (read from "
            "their headers only), and the carton.toml fields that differ. A tensor counts "
            "as changed when a chunk covering it differs; --exact compares those tensors' "
            "bytes."
        ),
        epilog="examples:\n  carton-registry diff llama:3 llama:4\n"
        "  carton-registry diff llama@prod 3f2a9c1d --exact --json",
    )
    p.add_argument("from_ref", metavar="FROM", help=REF_HELP)
    p.add_argument("to_ref", metavar="TO", help="the other carton, any reference as FROM")
    p.add_argument("--exact", action="store_true", help="compare changed tensors byte by byte")
    p.add_argument("--all", action="store_true", help="list unchanged files and tensors too")
    p.add_argument("--json", action="store_true", help="print the API's JSON (for scripts)")
    p.set_defaults(func=partial(cmd_diff, connect=connect))

    p = add_parser(
        sub,
        "lineage",
        "where a carton came from (the stored carton it shares most bytes with) and its "
        "derivatives",
        epilog="example:\n  carton-registry lineage llama:4",
    )
    p.add_argument("ref", metavar="REF", help=REF_HELP)
    p.add_argument("--json", action="store_true", help="print the API's JSON (for scripts)")
    p.set_defaults(func=partial(cmd_lineage, connect=connect))
