"""``pull`` and ``hydrate``: where a download goes (``-o FILE``, ``-o DIR``, ``-o -`` for
stdout, never over another file without ``--force``), a whole carton or one of its files.

Their arguments are defined with the other transfer commands (``client_commands``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from registry import client as api
from registry.allocator import keep_freed_memory
from registry.carton.errors import CartonFormatError
from registry.carton.streams import CHUNK
from registry.cli.client_commands import Connect, cache_detail, cache_summary, chunk_cache
from registry.cli.output import err, fail, human_bytes, transfer_progress
from registry.client.files import atomic_output


def _output_path(arg: str | None, default_name: Callable[[], str]) -> Path | None:
    """Where ``-o`` says to write: None for ``-`` (stdout); the default name inside a folder
    given as ``-o DIR``, or in the current folder without ``-o``. A missing folder is an
    error, not a new tree."""
    if arg == "-":
        return None
    if arg is None:
        return Path(default_name())
    path = Path(arg)
    if path.is_dir():
        return path / default_name()
    if arg.endswith(("/", os.sep)):
        raise FileNotFoundError(f"{arg.rstrip('/' + os.sep)}: no such folder (create it first)")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"{path.parent}: no such folder (create it first)")
    return path


def _check_replace(path: Path, manifest_sha256: str, force: bool) -> None:
    """Refuse, before any download, to replace an existing file that is not this very
    carton (unless ``force``); the same carton is compared byte for byte when written."""
    if force or not path.exists():
        return
    if path.is_file():
        from registry.carton.zipread import CartonArchive

        try:
            with CartonArchive.open(path, api.CLIENT_LIMITS) as archive:
                if archive.manifest_sha256 == manifest_sha256:
                    return
        except CartonFormatError:
            pass
    raise api.OutputExists(f"{path} exists and is another file; kept it (--force replaces it)")


@contextmanager
def _written(path: Path | None, name: str) -> Iterator[Path]:
    """The file a command writes: ``path``, or for stdout (None) a temp file whose bytes go
    to stdout once complete and verified."""
    if path is not None:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="carton-registry-") as tmp:
        target = Path(tmp) / name
        yield target
        with target.open("rb") as f:
            shutil.copyfileobj(f, sys.stdout.buffer, CHUNK)
        sys.stdout.flush()


def _pull_one_file(args: argparse.Namespace, client: api.RegistryClient, sha: str) -> int:
    """``pull REF FILE``: one file of the carton, verified against its MANIFEST sha256, from
    the chunks the local cache lacks."""
    files = {f["path"]: f for f in client.get_carton(sha).get("files", [])}
    entry = files.get(args.file)
    if entry is None:
        near = [p for p in files if p.endswith("/" + args.file) or Path(p).name == args.file]
        hint = f"; did you mean {' or '.join(near[:3])}?" if near else ""
        raise api.ClientError(f"carton {sha[:12]} has no file {args.file!r}{hint}", 404)
    output = _output_path(args.output, lambda: Path(args.file).name)
    if output is not None and output.exists() and not args.force:
        from registry.carton.streams import hash_stream

        with output.open("rb") as existing:
            same = output.is_file() and hash_stream(existing)[0] == entry["sha256"]
        if not same:
            raise api.OutputExists(
                f"{output} exists and is another file; kept it (--force replaces it)"
            )
    cache = chunk_cache(args)
    tally = api.Tally()
    url = f"{client.url}/blobs/{entry['sha256']}"
    label = output.name if output is not None else "to stdout"
    with (
        _written(output, Path(args.file).name) as target,
        transfer_progress(f"pull {label}", total=entry["size"]) as bar,
        atomic_output(target, force=args.force) as f,
    ):
        api.fetch_verified(
            client.http,
            args.file,
            entry["sha256"],
            [url],
            f,
            cache=cache,
            tally=tally,
            progress=bar.advance,
        )
    if cache is not None and cache.added:
        cache.trim()
    say = print if output is not None else err
    say(f"wrote {output or 'stdout'} ({args.file} of {sha[:12]}, {human_bytes(entry['size'])})")
    if cache is not None:
        say(cache_summary(tally))
    say(entry["sha256"])
    return 0


def cmd_pull(args: argparse.Namespace, connect: Connect) -> int:
    keep_freed_memory()
    with connect(args.url, args.token) as client:
        sha, _ = api.resolve(client, args.ref)
        if args.file is not None:
            return _pull_one_file(args, client, sha)
        # the default: the name a browser saves the web page's download as
        output = _output_path(args.output, lambda: client.carton_filename(sha, full=args.full))
        if output is not None:
            _check_replace(output, sha, args.force)
        cache = chunk_cache(args) if args.full else None
        tally = api.Tally()
        detail = cache_detail(tally) if cache is not None else None
        label = output.name if output is not None else "to stdout"
        with (
            _written(output, "pulled.carton") as target,
            transfer_progress(f"pull {label}", detail=detail) as bar,
        ):
            written = api.pull_carton(
                client,
                sha,
                target,
                full=args.full,
                cache=cache,
                tally=tally,
                on_start=bar.set_total,
                progress=bar.advance,
                force=args.force,
            )
    say = print if output is not None else err  # stdout is the carton's when it is `-o -`
    form = "full" if args.full else "slim"
    say(f"wrote {output or 'stdout'} ({form}, {human_bytes(written)}), manifest {sha}")
    if cache is not None:
        say(cache_summary(tally))
    say(sha)
    return 0


def _hydrated_name(slim: Path) -> str:
    """``NAME-HASH12-full.carton`` for the registry's ``NAME-HASH12.carton`` (the web's full
    download name), else ``STEM-full.carton``."""
    stem = slim.name.removesuffix(".carton")
    return f"{stem.removesuffix('-full')}-full.carton"


def _report_fetch(path: str, url: str, got: api.Tally) -> None:
    """Where one linked file came from: the network, the local chunk cache, or both."""
    if got.moved == 0 and got.reused:
        err(f"took {path} from the local cache ({human_bytes(got.reused)})")
    elif got.reused:
        err(
            f"fetched {path} from {url} ({human_bytes(got.moved)} received, "
            f"{human_bytes(got.reused)} from the local cache)"
        )
    else:
        err(f"fetched {path} from {url} ({human_bytes(got.moved)})")


def cmd_hydrate(args: argparse.Namespace) -> int:
    from registry.carton.zipread import CartonArchive

    keep_freed_memory()
    slim = Path(args.slim)
    if not slim.is_file():
        return fail(f"{slim}: no such file")
    output = _output_path(args.output, lambda: _hydrated_name(slim))
    if output is not None:
        try:
            with CartonArchive.open(slim, api.CLIENT_LIMITS) as archive:
                _check_replace(output, archive.manifest_sha256, args.force)
        except CartonFormatError as exc:
            raise api.ClientError(f"{slim}: {exc.message}") from exc
    cache = chunk_cache(args)
    tally = api.Tally()
    detail = cache_detail(tally) if cache is not None else None
    with (
        _written(output, "hydrated.carton") as target,
        transfer_progress(f"hydrate {slim.name}", detail=detail) as bar,
    ):
        sha = api.hydrate_carton(
            slim,
            target,
            token=args.token,
            registry_url=args.url,
            cache=cache,
            tally=tally,
            on_fetch=_report_fetch,
            progress=bar.advance,
            force=args.force,
        )
    say = print if output is not None else err
    say(f"wrote {output or 'stdout'}, manifest {sha}")
    if cache is not None:
        say(cache_summary(tally))
    say(sha)
    return 0
