"""Files a pushed carton names but does not hold: from the store, else through LINKS."""

from __future__ import annotations

import httpx

from registry.blobstore.errors import BlobNotFound
from registry.carton.streams import ChecksumReader
from registry.errors import FilesMissing, LinkFetchFailed, LinkHostNotAllowed
from registry.services.chunkstore.files import FileWriter
from registry.services.chunkstore.layout import FileLayout
from registry.services.chunkstore.writer import PackSession
from registry.services.context import RegistryContext
from registry.services.linkfetch import (
    LinkNotAllowed,
    LinkPolicy,
    LinkRefused,
    describe_failures,
    iter_link,
    make_client,
)


def _from_store(ctx: RegistryContext, sha256: str) -> FileLayout | None:
    """An object the store holds without an index row (an earlier push's leftover)."""
    try:
        raw = ctx.blobs.open(sha256)
    except BlobNotFound:
        return None
    with raw:
        reader = ChecksumReader(raw)
        reader.drain()
    return FileLayout(sha256, reader.size, reader.crc32, None)


def _httpx_errors() -> tuple[type[BaseException], ...]:
    return (httpx.HTTPError, httpx.InvalidURL, OSError)


def resolve_missing(
    ctx: RegistryContext,
    packs: PackSession,
    missing: dict[str, str],
    links: dict[str, list[str]] | None,
    hidden: set[str] | frozenset[str] = frozenset(),
) -> dict[str, FileLayout]:
    """A layout for every ``missing`` sha256 (-> a MANIFEST path naming it), or an error.

    Files with no URL are reported all at once (``FilesMissing.missing``), so a
    client can upload them and push again. ``hidden``: files not taken from the store:
    those it holds for others than the caller (``registry.services.private_dedup``), and
    those lost or damaged there.
    """
    found: dict[str, FileLayout] = {}
    for sha256 in sorted(missing):
        layout = None if sha256 in hidden else _from_store(ctx, sha256)
        if layout is not None:
            found[sha256] = layout
    links = links or {}
    unlinked = sorted(sha for sha in missing if sha not in found and not links.get(sha))
    if unlinked:
        first = unlinked[0]
        more = f" (and {len(unlinked) - 1} more)" if len(unlinked) > 1 else ""
        raise FilesMissing(
            f"{missing[first]} (sha256 {first}) is not in the zip, not in the registry, "
            f"and LINKS has no URL for it{more}",
            missing=unlinked,
        )
    pending = [sha for sha in sorted(missing) if sha not in found]
    if not pending:
        return found
    policy = LinkPolicy(ctx.settings.link_fetch_allow, ctx.settings.link_fetch_timeout)
    with make_client(policy) as client:
        for sha256 in pending:
            found[sha256] = _fetch(ctx, packs, client, policy, sha256, missing[sha256], links)
    return found


def _fetch(
    ctx: RegistryContext,
    packs: PackSession,
    client: httpx.Client,
    policy: LinkPolicy,
    sha256: str,
    path: str,
    links: dict[str, list[str]],
) -> FileLayout:
    failures: list[tuple[str, str]] = []
    not_allowed = 0
    for url in links[sha256]:
        writer = FileWriter(packs)
        try:
            for data in iter_link(client, url, policy, ctx.archive_limits.max_unpacked_bytes):
                writer.write(data)
        except LinkRefused as exc:
            failures.append((url, str(exc)))
            not_allowed += isinstance(exc, LinkNotAllowed)
            continue
        except _httpx_errors() as exc:
            failures.append((url, f"{type(exc).__name__}: {exc}"))
            continue
        layout = writer.close()
        if layout.sha256 != sha256:
            failures.append((url, "content does not hash to the linked sha256"))
            continue
        return layout
    error = LinkHostNotAllowed if not_allowed == len(links[sha256]) else LinkFetchFailed
    raise error(
        f"{path} (sha256 {sha256}) could not be fetched through LINKS: "
        + describe_failures(failures)
    )
