"""Operator commands: ``gc``, ``fsck`` and ``token``.

They work on the database and blob store directly (``Settings.from_env()``),
not through a server, so they run next to the servers with the same
``REGISTRY_*`` variables. They only open a registry that exists and is
migrated (``RegistryContext.open_existing``): run in the wrong place, they
refuse in one line instead of creating an empty one. The services are
imported when a command runs, so client commands start fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from registry.cli.output import Refused, err, fail, human_bytes, print_json, print_table
from registry.errors import RegistryError, StorageNotReady
from registry.settings import Settings, parse_duration, parse_share, redact_url

if TYPE_CHECKING:
    from registry.services.context import RegistryContext

STORAGE_HELP = (
    "Acts on the server's storage, named by the same settings the server reads: "
    "REGISTRY_DATABASE_URL and REGISTRY_BLOB_STORE (default: registry.db and blobs/ under "
    "REGISTRY_DATA_DIR, ./data), with REGISTRY_S3_ENDPOINT_URL for S3. It does not talk to "
    "a server: REGISTRY_URL and --url play no part. It refuses to run unless that database "
    "exists and is migrated, and creates nothing."
)


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _share(text: str) -> float:
    try:
        return parse_share(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from exc
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


@contextmanager
def _open_registry() -> Iterator[RegistryContext]:
    """The server's registry, after saying on stderr which database and blob store it is."""
    from registry.services.context import RegistryContext

    try:
        settings = Settings.from_env()
    except ValueError as exc:
        raise Refused(f"bad settings: {exc}") from exc
    try:
        ctx = RegistryContext.open_existing(settings)
    except StorageNotReady as exc:
        raise Refused(exc.message) from exc
    err(
        f"database {redact_url(settings.database_url)}, "
        f"blob store {redact_url(settings.blob_store)}"
    )
    with closing(ctx):
        yield ctx


def _timestamp(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else "-"


def cmd_gc(args: argparse.Namespace) -> int:
    from registry.blobstore.errors import BlobStoreError
    from registry.errors import GcBusy
    from registry.services.gc import collect_garbage

    with _open_registry() as ctx:
        grace = args.grace if args.grace is not None else ctx.settings.gc_grace
        try:
            report = collect_garbage(ctx, grace, dry_run=args.dry_run, max_unused=args.max_unused)
        except GcBusy as exc:
            return fail(exc.message, 75)
        except (RegistryError, BlobStoreError) as exc:
            return fail(exc.message)
    if args.json:
        print_json(report.as_json())
        return 0
    verb = "would delete" if args.dry_run else "deleted"
    for sha in report.deleted if args.verbose or args.dry_run else ():
        print(f"{verb} {sha}")
    print(
        f"gc{' (dry run)' if args.dry_run else ''}: {verb} {report.blobs_deleted} blobs, "
        f"{'would free' if args.dry_run else 'freed'} {report.bytes_freed} bytes "
        f"({human_bytes(report.bytes_freed)}); {report.candidates} candidates older than "
        f"{grace:g}s, {report.skipped_leased} kept for pushes in progress, "
        f"{report.temp_removed} stale temp files, {report.leases_expired} expired leases; "
        f"{report.duration:.2f}s"
    )
    return 0


def cmd_fsck(args: argparse.Namespace) -> int:
    from registry.blobstore.errors import BlobStoreError
    from registry.services.fsck import check_integrity

    with _open_registry() as ctx:
        try:
            report = check_integrity(
                ctx, verify_hashes=args.verify_hashes or args.sample is not None, sample=args.sample
            )
        except (RegistryError, BlobStoreError) as exc:
            return fail(exc.message, 2)
    if args.json:
        print_json(report.as_json())
        return 0 if report.ok else 1
    for sha in report.missing:
        print(f"missing blob {sha}")
    for sha in report.wrong_size:
        print(f"wrong-size blob {sha}")
    for sha in report.corrupt:
        print(f"corrupt blob {sha}")
    for sha in report.orphans:
        print(f"orphan blob {sha} (unreferenced; collected by gc after its grace period)")
    for sha in report.orphan_files:
        print(f"orphan chunked file {sha} (unreferenced; collected by gc after its grace period)")
    for chunk in report.corrupt_chunks:
        print(f"corrupt chunk {chunk['idx']} of pack {chunk['pack']} (BLAKE3 {chunk['hash']})")
    for name in report.packs_missing:
        print(f"missing pack {name}")
    if report.unused_packs_lost or report.unused_chunks_corrupt:
        print(
            f"{len(report.unused_packs_lost)} lost packs and {report.unused_chunks_corrupt} "
            "corrupt chunks no file uses any more (healed; gc drops them)"
        )
    for manifest in report.affected_cartons:
        print(f"affected carton {manifest} (its versions are now UNAVAILABLE)")
    hashed = (
        f", {report.blobs_hashed} hashed ({human_bytes(report.bytes_hashed)})"
        if report.blobs_hashed
        else ""
    )
    print(
        f"fsck: {'ok' if report.ok else 'PROBLEMS FOUND'}: {report.blobs_checked} blobs checked"
        f"{hashed}; {len(report.missing)} missing, {len(report.wrong_size)} wrong size, "
        f"{len(report.corrupt)} corrupt, {len(report.orphans) + len(report.orphan_files)} "
        "orphans, "
        f"{len(report.affected_cartons)} cartons affected"
    )
    return 0 if report.ok else 1


def cmd_token_create(args: argparse.Namespace) -> int:
    from registry.services.auth import create_token

    with _open_registry() as ctx:
        try:
            token, info = create_token(ctx, args.name, args.scope, args.namespace or ())
        except RegistryError as exc:
            return fail(exc.message)
    if args.json:
        print_json(
            {
                "token": token,
                "name": info.name,
                "scopes": list(info.scopes),
                "namespaces": list(info.namespaces) or None,
                "id": info.id,
            },
            indent=None,
        )
        return 0
    where = f" in namespace(s) {', '.join(info.namespaces)}" if info.namespaces else ""
    err(
        f"created token {info.id} {info.name!r} with scopes {', '.join(info.scopes)}{where}; "
        "it is shown once, store it now:"
    )
    print(token)
    return 0


def cmd_token_list(args: argparse.Namespace) -> int:
    from registry.services.auth import list_tokens

    with _open_registry() as ctx:
        tokens = list_tokens(ctx, include_revoked=args.all)
    if args.json:
        print_json([t.as_json() for t in tokens])
        return 0
    print_table(
        ("ID", "NAME", "SCOPE", "CREATED", "LAST USED", "REVOKED"),
        [
            (
                t.id,
                t.name,
                t.scope or "-",
                _timestamp(t.created_at),
                _timestamp(t.last_used_at),
                _timestamp(t.revoked_at),
            )
            for t in tokens
        ],
        right=("ID",),
    )
    if not tokens:
        err("no tokens" if args.all else "no active tokens (--all shows revoked ones)")
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    from registry.services.auth import revoke_token

    with _open_registry() as ctx:
        try:
            revoked = revoke_token(ctx, args.id_or_name)
        except RegistryError as exc:
            return fail(exc.message)
    for t in revoked:
        print(f"revoked token {t.id} {t.name!r}")
    return 0


def add_commands(subparsers: Any) -> None:
    """Add ``gc``, ``fsck`` and ``token`` to the ``carton-registry`` subcommands."""
    gc = subparsers.add_parser(
        "gc",
        help="delete unreferenced blobs older than the grace period (server storage, online)",
        description=(
            "Mark and sweep while the registry serves: blobs no carton references and "
            "older than --grace are deleted, except those held by pushes in progress; "
            "stale temp files go too. One GC at a time; exit status 75 when another runs."
        ),
        epilog=STORAGE_HELP,
    )
    gc.add_argument(
        "--grace",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="keep unreferenced blobs younger than this (0s, 90s, 30m, 1h, 7d; "
        "default: $REGISTRY_GC_GRACE or 1h)",
    )
    gc.add_argument(
        "--max-unused",
        type=_share,
        default=None,
        metavar="SHARE",
        help="rewrite packs holding dead chunks until at most this share of the live bytes "
        "(plus 1 MiB) stays dead, like restic's prune --max-unused (2%% or 0.02; "
        "default: $REGISTRY_GC_MAX_UNUSED or 2%%)",
    )
    gc.add_argument("--dry-run", action="store_true", help="report what would go; delete nothing")
    gc.add_argument("--json", action="store_true", help="print the report as JSON")
    gc.add_argument("-v", "--verbose", action="store_true", help="list every deleted blob")
    gc.set_defaults(func=cmd_gc)

    fsck = subparsers.add_parser(
        "fsck",
        help="check that every blob the index names is stored intact (server storage)",
        description=(
            "Every blob the database names must be in the store with its size; with "
            "--verify-hashes its sha256 is recomputed. Versions of affected cartons are "
            "marked UNAVAILABLE. Exit status 1 when anything is missing, wrong or corrupt."
        ),
        epilog=STORAGE_HELP,
    )
    fsck.add_argument(
        "--verify-hashes", action="store_true", help="recompute every blob's sha256 (reads all)"
    )
    fsck.add_argument(
        "--sample",
        type=_positive_int,
        default=None,
        metavar="N",
        help="recompute the sha256 of N random blobs (implies --verify-hashes)",
    )
    fsck.add_argument("--json", action="store_true", help="print the report as JSON")
    fsck.set_defaults(func=cmd_fsck)

    token = subparsers.add_parser(
        "token",
        help="create, list and revoke API tokens (server storage)",
        description="Manage the API tokens the registry accepts (see REGISTRY_AUTH).",
        epilog=STORAGE_HELP,
    )
    token_sub = token.add_subparsers(dest="token_command", metavar="{create,list,revoke}")
    token_sub.required = True
    create = token_sub.add_parser(
        "create",
        help="create a token (printed once, alone on the last line)",
        description="Create a token; its value is shown once, alone on the last stdout line.",
        epilog=STORAGE_HELP,
    )
    create.add_argument(
        "--scope",
        required=True,
        choices=["pull", "push", "delete", "admin"],
        help="what it may do: pull ⊂ push ⊂ delete ⊂ admin",
    )
    create.add_argument("--name", default=None, help="a unique name (default: <scope>-<id>)")
    create.add_argument(
        "--namespace",
        action="append",
        metavar="NS",
        help="act only inside namespace NS (repeat for several); without it the token is global",
    )
    create.add_argument(
        "--json", action="store_true", help="print {token, name, scopes, id} as JSON"
    )
    create.set_defaults(func=cmd_token_create)
    listing = token_sub.add_parser(
        "list", help="list tokens (never their values)", epilog=STORAGE_HELP
    )
    listing.add_argument("--all", action="store_true", help="include revoked tokens")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(func=cmd_token_list)
    revoke = token_sub.add_parser(
        "revoke", help="revoke a token by id or name", epilog=STORAGE_HELP
    )
    revoke.add_argument("id_or_name", metavar="ID|NAME", help="the token's id or name")
    revoke.set_defaults(func=cmd_token_revoke)
