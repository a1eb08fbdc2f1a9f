"""Transfer commands over the REST API: ``push``, ``pull``, ``hydrate``; and ``inspect``,
which reads a local file and needs no registry.

Each command takes ``connect``, which opens the ``RegistryClient`` it talks
through, so a caller (a test, a script) decides the transport. What every
registry command shares (``Connect``, ``--url``/``--token``, what a REF is) is here.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from registry import client as api
from registry.allocator import keep_freed_memory
from registry.carton.errors import CartonFormatError
from registry.cli.output import (
    HelpFormatter,
    err,
    fail,
    human_bytes,
    print_json,
    transfer_progress,
)

Connect = Callable[[str, str | None], "api.RegistryClient"]
"""Opens a client for ``(url, token)``; ``registry_client`` by default."""


def registry_client(url: str, token: str | None) -> api.RegistryClient:
    """``RegistryClient(url, token)``, its module (and httpx) imported only now: commands
    that never talk to a registry (``serve``, ``gc``, ``inspect``) do not load them."""
    return api.RegistryClient(url, token)


REF_HELP = (
    "a manifest hash (also as sha256:HASH, or a unique prefix of 8+ hex digits), "
    "NAME (its 'latest' tag, else its highest version), NAME:VERSION or NAME@TAG"
)
VERDICTS = (400, 413, 422)
"""Statuses by which the registry refuses what was sent: errors that are about the file."""


def _push_detail(tally: api.Tally) -> Callable[[], str]:
    return lambda: f"sent {human_bytes(tally.moved)}, {human_bytes(tally.reused)} already there"


def cache_detail(tally: api.Tally) -> Callable[[], str]:
    return lambda: f"received {human_bytes(tally.moved)}, {human_bytes(tally.reused)} cached"


def chunk_cache(args: argparse.Namespace) -> api.ChunkCache | None:
    return None if args.no_cache else api.ChunkCache.default()


def cache_summary(tally: api.Tally) -> str:
    """How much of the files came over the network, and how much from the local cache."""
    total = tally.moved + tally.reused
    if total == 0:
        return "nothing to fetch: every file was inside the zip"
    return (
        f"received {human_bytes(tally.moved)} of {human_bytes(total)}; "
        f"{human_bytes(tally.reused)} from the local cache"
    )


def cmd_push(args: argparse.Namespace, connect: Connect) -> int:
    source = Path(args.file)
    if source.is_dir():  # a folder holding carton.toml: packed first, then pushed
        from registry.carton.pack import pack_folder

        with tempfile.TemporaryDirectory(prefix="carton-registry-pack-") as tmp:
            packed = Path(tmp) / f"{source.resolve().name or 'folder'}.carton"
            try:
                with packed.open("wb") as f:
                    manifest = pack_folder(source, f)
            except CartonFormatError as exc:
                raise api.ClientError(f"{source}: {exc.message}") from exc
            size = human_bytes(packed.stat().st_size)
            err(f"packed {source} ({len(manifest.entries)} files, {size})")
            return _push_file(args, connect, packed)
    if not source.is_file():
        return fail(f"{source}: no such file or folder")
    return _push_file(args, connect, source)


def _push_file(args: argparse.Namespace, connect: Connect, path: Path) -> int:
    tally = api.Tally()
    with (
        connect(args.url, args.token) as client,
        transfer_progress(f"push {path.name}", detail=_push_detail(tally)) as bar,
    ):

        def on_plan(plan: api.PushPlan) -> None:
            bar.set_total(plan.read_bytes)
            if plan.uploads:  # bytes will move: not worth the import for a re-push
                keep_freed_memory()

        if args.full:
            keep_freed_memory()
            bar.set_total(path.stat().st_size)
        try:
            outcome = api.push_carton(
                client,
                path,
                model=args.model,
                tag=args.tag,
                namespace=args.namespace,
                full=args.full,
                verified=None if args.no_cache else api.VerifiedCartons.default(),
                tally=tally,
                on_plan=on_plan,
                on_send_whole=lambda why: err(f"note: {why}; sending it whole"),
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
    # Files an upload created before the POST are new to the registry, though the POST found
    # them stored (an upload that healed a damaged file created nothing).
    total = int(r.get("bytes_total") or 0)
    uploaded_new = 0 if outcome.full else tally.new_files
    new = min(total, int(r.get("bytes_new") or 0) + uploaded_new)
    stored = int(r.get("bytes_stored") or 0) + (0 if outcome.full else tally.stored)
    print(f"pushed {label}" + ("" if new else " (nothing new)"))
    print(
        f"files: {r.get('files')}, {human_bytes(total)} in all: "
        f"{human_bytes(new)} in new files, {human_bytes(total - new)} deduplicated as files; "
        f"{human_bytes(stored)} stored after chunk dedup"
    )
    healed = int(r.get("bytes_healed") or 0) + (0 if outcome.full else tally.healed)
    if healed:
        print(f"healed: {human_bytes(healed)} written again in place of damaged or lost copies")
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
    if not outcome.full:
        print(
            f"sent {human_bytes(tally.moved)} of {human_bytes(total)}; "
            f"{human_bytes(max(0, total - tally.moved))} already in the registry"
        )
    print(outcome.manifest_sha256)
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


CACHE_NOTE = (
    "The chunk cache is carton-registry/chunks in the platform's cache folder "
    f"($XDG_CACHE_HOME, else ~/.cache; ~/Library/Caches on macOS), at most "
    f"${api.MAX_BYTES_ENV} bytes (default 10 GiB), least recently used chunks first out."
)


def add_force(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an existing output file that holds something else (else it is kept)",
    )


def add_no_cache(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--no-cache", action="store_true", help=what)


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
    from registry.cli import download_commands as downloads  # it imports this module

    p = add_parser(
        sub,
        "push",
        "push a carton, sending only the files and chunks the registry lacks",
        description=(
            "Push a carton. Asks the registry which files it lacks and uploads only those; "
            "a large file goes as the chunks the registry lacks, so a fine-tune sends little "
            "more than what changed, and an interrupted push, run again, sends only the rest. "
            "Every file in the zip is checked against its MANIFEST sha256 (a carton file "
            "verified by an earlier push, unchanged since, is not read again). Prints the "
            "manifest hash on the last line."
        ),
        epilog="examples:\n  carton-registry push model.carton --tag prod\n"
        "  carton-registry push ./my-model/",
    )
    p.add_argument(
        "file",
        metavar="FILE|DIR",
        help="the .carton file, or a folder holding carton.toml (packed into a deterministic "
        "carton first: the same folder always makes the same manifest)",
    )
    p.add_argument("--tag", help="point this tag of the model at the pushed version (e.g. prod)")
    p.add_argument(
        "--model", metavar="NAME", help="model name, for a carton whose carton.toml has none"
    )
    p.add_argument(
        "--namespace",
        metavar="NS",
        help="push the model into namespace NS (model 'bert' becomes 'NS/bert')",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="send the whole file in one request (the registry checks it all)",
    )
    add_no_cache(p, "hash every file, even of a carton file verified before, and remember nothing")
    p.set_defaults(func=partial(cmd_push, connect=connect))

    p = add_parser(
        sub,
        "pull",
        "download a carton",
        description=(
            "Download a carton: slim by default (big files stay on the registry, named in "
            "LINKS), or --full with every file inline. With --full, the big files are made "
            "of chunks kept in a local cache and only the chunks it lacks are fetched. The "
            "download is verified and appears only when complete. " + CACHE_NOTE
        ),
        epilog="examples:\n  carton-registry pull resnet@prod\n"
        "  carton-registry pull resnet:v3 model/config.json -o -\n"
        "  carton-registry pull resnet:3 --full -o resnet.carton",
    )
    p.add_argument("ref", metavar="REF", help=REF_HELP)
    p.add_argument(
        "file",
        metavar="FILE",
        nargs="?",
        help="one file of the carton (its MANIFEST path, e.g. model/weights.bin) instead of "
        "the carton; written under its base name",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="where to write it: a file, a folder (the default name in it), or - for stdout "
        "(default: the web download's name, NAME-HASH12[-full].carton)",
    )
    add_force(p)
    p.add_argument("--full", action="store_true", help="every file inline (no LINKS)")
    add_no_cache(p, "with --full, download the registry's full carton as is, no chunk cache")
    p.set_defaults(func=partial(downloads.cmd_pull, connect=connect))

    p = add_parser(
        sub,
        "hydrate",
        "turn a slim carton into a full one, fetching its LINKS",
        description=(
            "Write a full carton from a slim one: every file LINKS names is fetched (from "
            "any host) and checked against its sha256; from a registry, only the chunks the "
            "local cache lacks. The token is sent only to --url. " + CACHE_NOTE
        ),
        epilog="example:\n  carton-registry hydrate resnet-3f2a9c1d4e5b.carton -o full.carton",
    )
    p.add_argument("slim", metavar="SLIM", help="the slim .carton file")
    p.add_argument(
        "-o",
        "--output",
        metavar="FULL",
        help="the full carton to write: a file, a folder, or - for stdout "
        "(default: SLIM's name with -full, e.g. NAME-HASH12-full.carton)",
    )
    add_force(p)
    add_no_cache(p, "fetch every linked file whole, no chunk cache")
    p.set_defaults(func=downloads.cmd_hydrate)

    p = sub.add_parser(
        "inspect",
        help="validate a local carton and describe it (JSON; needs no registry)",
        description=(
            "Validate a local carton and print what it holds as JSON (manifest_sha256, "
            "model_name, runner, inputs, outputs, files, problems, warnings). Never fetches "
            "LINKS. Exit status 1 when it has problems; warnings (a self test the /v2 routes "
            "cannot send, by the rule they refuse it with) do not fail it."
        ),
    )
    p.add_argument("file", metavar="FILE", help="the .carton file")
    p.set_defaults(func=cmd_inspect)
