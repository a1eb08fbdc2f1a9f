"""Catalog commands over the REST API: ``ls``, ``info``, ``versions``, ``tags`` read it;
``tag``, ``untag`` and ``rm`` change it.

Readers print tables for people and take ``--json`` for scripts; ``info`` shows the
full manifest hash and the model name in both (DESIGN.md "CLI output").
"""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from registry import client as api
from registry.cli.client_commands import REF_HELP, Connect, add_parser
from registry.cli.output import Refused, err, print_json, print_table
from registry.humanize import absolute_time, human_bytes, relative_time

SHORT_HASH = 12  # as docker shows image ids; any 8+ digits work as a reference
DESCRIPTION_WIDTH = 60


def _short(text: str | None, width: int = DESCRIPTION_WIDTH) -> str:
    text = (text or "").strip()
    return text if len(text) <= width else text[: width - 1] + "…"


def cmd_ls(args: argparse.Namespace, connect: Connect) -> int:
    with connect(args.url, args.token) as client:
        if args.namespace:  # "acme/" or "acme": one namespace's models
            models = list(client.list_models(args.q, namespace=args.namespace.rstrip("/")))
        else:
            models = list(client.list_models(args.q))
    if args.json:
        print_json(models)
        return 0
    if not models:
        err("no models" + (f" match {args.q!r}" if args.q else " yet"))
        return 0
    print_table(
        ("NAME", "LATEST", "RUNNER", "SIZE", "UPDATED", "DESCRIPTION"),
        [
            (
                m["name"],
                f"v{m['latest_version']}",
                m.get("runner_name") or "-",
                human_bytes(m.get("bytes_total")),
                relative_time(m.get("updated_at")),
                _short(m.get("short_description") or m.get("description_first_line")),
            )
            for m in models
        ],
        right=("LATEST", "SIZE"),
    )
    return 0


def _tags_by_version(model: dict[str, Any]) -> dict[int, list[str]]:
    tags: dict[int, list[str]] = {}
    for tag, target in sorted(model.get("tags", {}).items()):
        tags.setdefault(target["version"], []).append(tag)
    return tags


def _tensor_rows(specs: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    def shape(value: Any) -> str:
        if isinstance(value, list):
            return "[" + ", ".join(str(d) for d in value) + "]" if value else "scalar"
        return str(value)

    return [
        (t["name"], t.get("dtype") or "-", shape(t.get("shape")), _short(t.get("description")))
        for t in specs
    ]


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
        url = f"{client.url}/cartons/{sha}.carton"
    if args.json:
        print_json(info, ensure_ascii=False)
        return 0
    published = info.get("versions", [])
    if name is not None:
        shown = next((v for v in published if v["model_name"] == name), None)
        title = f"{name} version {shown['version']}" if shown else name
    else:
        title = info.get("model_name") or "unnamed carton"
    print(title)
    runner = info.get("runner") or {}
    facts = [
        ("manifest", sha),
        ("description", info.get("short_description") or _short(info.get("description"))),
        (
            "runner",
            f"{runner.get('runner_name') or '-'} "
            f"(framework {runner.get('required_framework_version') or '-'})",
        ),
        ("platforms", ", ".join(info.get("required_platforms") or []) or "any"),
        ("files", f"{info.get('file_count')}, {human_bytes(info.get('bytes_total'))}"),
        (
            "pushed",
            f"{absolute_time(info.get('created_at'))} ({relative_time(info.get('created_at'))})",
        ),
        (
            "published as",
            ", ".join(
                f"{v['model_name']}:{v['version']}" + "".join(f" @{t}" for t in v.get("tags", []))
                for v in published
            )
            or "-",
        ),
        ("url", url),
    ]
    width = max(len(label) for label, _ in facts)
    for label, value in facts:
        print(f"{label.ljust(width)}  {value or '-'}")
    for heading, specs in (("inputs", info.get("inputs")), ("outputs", info.get("outputs"))):
        if specs:
            print(f"\n{heading}:")
            print_table(("NAME", "DTYPE", "SHAPE", "DESCRIPTION"), _tensor_rows(specs))
    if "model" in info:
        print(f"\nversions of {name}:")
        _print_versions(info["model"], current=sha)
    return 0


def _print_versions(model: dict[str, Any], current: str | None = None) -> None:
    tags = _tags_by_version(model)
    print_table(
        ("VERSION", "MANIFEST", "TAGS", "FILES", "SIZE", "STATE", "PUSHED"),
        [
            (
                ("* " if v["manifest_sha256"] == current else "") + f"v{v['version']}",
                v["manifest_sha256"][:SHORT_HASH],
                ", ".join(tags.get(v["version"], [])) or "-",
                v.get("files", "-"),
                human_bytes(v.get("bytes_total")),
                v.get("state", "-"),
                relative_time(v.get("created_at")),
            )
            for v in model.get("versions", [])
        ],
        right=("VERSION", "FILES", "SIZE"),
    )


def cmd_versions(args: argparse.Namespace, connect: Connect) -> int:
    with connect(args.url, args.token) as client:
        model = api.get_model(client, args.name)
    if not model.get("versions"):  # as `info NAME` and `pull NAME` say it
        raise api.ClientError(f"model {args.name!r} has no versions (all were removed)", 404)
    if args.json:
        print_json(model.get("versions", []), ensure_ascii=False)
    else:
        _print_versions(model)
    return 0


def cmd_tags(args: argparse.Namespace, connect: Connect) -> int:
    with connect(args.url, args.token) as client:
        model = api.get_model(client, args.name)
    tags = model.get("tags", {})
    if args.json:
        print_json(tags, ensure_ascii=False)
        return 0
    if not tags:
        err(f"model {args.name!r} has no tags")
        return 0
    print_table(
        ("TAG", "VERSION", "MANIFEST"),
        [(t, f"v{v['version']}", v["manifest_sha256"]) for t, v in sorted(tags.items())],
        right=("VERSION",),
    )
    return 0


def _model_of(client: api.RegistryClient, sha: str, name: str | None) -> str:
    """The model a tag goes on: the reference's, else the one model the carton is in."""
    if name is not None:
        return name
    names: list[str] = sorted({v["model_name"] for v in client.get_carton(sha).get("versions", [])})
    if len(names) == 1:
        return names[0]
    if not names:
        raise Refused(f"carton {sha} is in no model; push it with --model NAME first")
    raise Refused(
        f"carton {sha} is in several models ({', '.join(names)}); name one, e.g. {names[0]}:N"
    )


def cmd_tag(args: argparse.Namespace, connect: Connect) -> int:
    with connect(args.url, args.token) as client:
        sha, name = api.resolve(client, args.ref)
        model = _model_of(client, sha, name)
        expected = api.resolve(client, args.if_match)[0] if args.if_match else None
        moved = client.put_tag(model, args.tag, sha, if_match=expected)
    print(f"tagged {model}@{moved['tag']}: version {moved['version']}")
    print(moved["manifest_sha256"])
    return 0


def _model_tag(ref: str) -> tuple[str, str]:
    name, _, tag = api.parse_ref(ref)
    if name is None or tag is None:
        raise Refused(f"expected NAME@TAG, got {ref!r}")
    return name, tag


def _rm_target(ref: str) -> tuple[str, int | None]:
    """``(name, version)``, or ``(name, None)`` for a whole model: ``rm`` never guesses which
    version a tag meant."""
    name, version, tag = api.parse_ref(ref)
    if name is None or tag is not None:
        raise Refused(f"expected NAME:VERSION or NAME, got {ref!r}")
    return name, version


def cmd_untag(args: argparse.Namespace, connect: Connect) -> int:
    name, tag = _model_tag(args.ref)
    with connect(args.url, args.token) as client:
        expected = api.resolve(client, args.if_match)[0] if args.if_match else None
        client.delete_tag(name, tag, if_match=expected)
    print(f"untagged {name}@{tag}")
    return 0


def cmd_rm(args: argparse.Namespace, connect: Connect) -> int:
    targets = [_rm_target(ref) for ref in args.refs]
    whole = [name for name, version in targets if version is None]
    if whole and not args.yes:
        raise Refused(
            f"`rm {whole[0]}` removes every version of {whole[0]!r}; "
            "add --yes to mean it, or name one version as NAME:VERSION"
        )
    with connect(args.url, args.token) as client:
        for name, version in targets:
            if version is None:
                api.get_model(client, name)  # a typo'd name: the nearest names, not a bare 404
                gone = client.delete_model(name)
                print(
                    f"removed model {name} ({gone.get('versions')} version(s), "
                    f"{gone.get('cartons_deleted')} carton(s) no other model uses); "
                    "their blobs go at the next gc unless other cartons use them"
                )
                continue
            gone = client.delete_version(name, version)
            fate = (
                "the carton went with it; blobs no other carton uses go at the next gc"
                if gone.get("carton_deleted")
                else "its carton stays: other versions use it"
            )
            print(f"removed {name} version {version} (manifest {gone['manifest_sha256']}): {fate}")
    return 0


def add_commands(sub: Any, connect: Connect) -> None:
    """Add ls, info, versions, tags, tag, untag and rm to the subcommands."""
    json_help = "print JSON instead of a table (for scripts)"

    p = add_parser(
        sub,
        "ls",
        "list models: latest version, runner, size, last push",
        epilog="examples:\n  carton-registry ls\n  carton-registry ls acme/\n"
        "  carton-registry ls -q resnet --json",
    )
    p.add_argument(
        "namespace",
        metavar="NAMESPACE/",
        nargs="?",
        help="only the models of this namespace (e.g. acme/)",
    )
    p.add_argument(
        "-q", "--q", dest="q", metavar="TEXT", help="only models whose name or text has TEXT"
    )
    p.add_argument("--json", action="store_true", help=json_help)
    p.set_defaults(func=partial(cmd_ls, connect=connect))

    p = add_parser(
        sub,
        "info",
        "describe a carton: manifest hash, runner, inputs, outputs, versions, its URL",
        epilog="examples:\n  carton-registry info resnet@prod\n  carton-registry info 3f2a9c1d",
    )
    p.add_argument("ref", metavar="REF", help=REF_HELP)
    p.add_argument("--json", action="store_true", help="print the full metadata as JSON")
    p.set_defaults(func=partial(cmd_info, connect=connect))

    p = add_parser(sub, "versions", "list a model's versions, newest first")
    p.add_argument("name", metavar="NAME", help="the model name")
    p.add_argument("--json", action="store_true", help=json_help)
    p.set_defaults(func=partial(cmd_versions, connect=connect))

    p = add_parser(sub, "tags", "list a model's tags and the versions they point at")
    p.add_argument("name", metavar="NAME", help="the model name")
    p.add_argument("--json", action="store_true", help=json_help)
    p.set_defaults(func=partial(cmd_tags, connect=connect))

    p = add_parser(
        sub,
        "tag",
        "point a tag of a model at a version (create or move it)",
        description=(
            "Point TAG of REF's model at REF's version, creating or moving it. With "
            "--if-match it is a compare-and-swap: it moves only if TAG still points at that "
            "carton, else fails (HTTP 412) and changes nothing."
        ),
        epilog="examples:\n  carton-registry tag resnet:4 prod\n"
        "  carton-registry tag resnet:4 prod --if-match resnet:3",
    )
    p.add_argument("ref", metavar="REF", help=REF_HELP)
    p.add_argument("tag", metavar="TAG", help="letters, digits, '.', '_', '-' (e.g. prod)")
    p.add_argument(
        "--if-match",
        metavar="REF",
        help="move only if the tag points at this carton now (any REF, e.g. a hash prefix)",
    )
    p.set_defaults(func=partial(cmd_tag, connect=connect))

    p = add_parser(
        sub,
        "untag",
        "remove a tag (the version stays)",
        epilog="example:\n  carton-registry untag resnet@canary",
    )
    p.add_argument("ref", metavar="NAME@TAG", help="the model and the tag to remove")
    p.add_argument(
        "--if-match", metavar="REF", help="remove only if the tag points at this carton now"
    )
    p.set_defaults(func=partial(cmd_untag, connect=connect))

    p = add_parser(
        sub,
        "rm",
        "remove model versions, or a whole model",
        description=(
            "Remove versions at once (their URLs answer 404; version numbers are never "
            "reused); a bare NAME removes every version of the model (with --yes). A carton "
            "no version uses any more goes too; its blobs are deleted by the next `gc` "
            "unless other cartons use them. Needs a token with the delete scope."
        ),
        epilog="examples:\n  carton-registry rm resnet:2 resnet:3\n"
        "  carton-registry rm resnet --yes",
    )
    p.add_argument(
        "refs", metavar="NAME:VERSION|NAME", nargs="+", help="the versions (or models) to remove"
    )
    p.add_argument("--yes", action="store_true", help="confirm removing a whole model")
    p.set_defaults(func=partial(cmd_rm, connect=connect))
