"""Push: ask which files the registry lacks, upload those, then post a slim zip.

Files of at most the registry's ``min_file_bytes`` are uploaded whole; larger
ones as the chunks the registry lacks (``registry.client.chunks``), unless a probe
of a few of their chunks finds that the registry holds nothing of them: those go
whole too, and the registry cuts them (a fresh file costs the push no cutting and
naming here, and the registry no second read to check it). The slim zip
(carton.toml, tensor index, MANIFEST, LINKS) lets the registry validate and index
the carton from files it already holds. Every file the zip holds is hashed on the
way, uploaded or not: the registry never sees the bytes of a file it already has,
so only the client can tell that the local file no longer matches its MANIFEST.
A carton file verified that way is remembered (``VerifiedCartons``) while it stays
unchanged, so pushing it again reads only its directory and MANIFEST, and does not ask
first (``registry.client.plan``): one request, the slim POST.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from registry.carton.errors import CartonFormatError
from registry.carton.names import model_conflict, names_another_model
from registry.carton.paths import CARTON_TOML, LINKS_NAME, MANIFEST_NAME, TENSOR_INDEX
from registry.carton.streams import CHUNK, ByteStream
from registry.carton.zipformat import STORED
from registry.carton.zipread import CartonArchive
from registry.carton.zipwrite import write_zip
from registry.client.cache import VerifiedCartons
from registry.client.files import CLIENT_LIMITS
from registry.client.members import LocalCarton
from registry.client.plan import (
    PushPlan,
    may_presume,
    plan_push,
    presumed_plan,
)
from registry.client.sender import Sender
from registry.client.transport import ClientError, Progress, RegistryClient, Tally


@dataclass
class PushOutcome:
    manifest_sha256: str
    response: dict[str, Any]
    uploaded_blobs: int = 0
    uploaded_bytes: int = 0
    already_stored: int = 0
    linked: list[str] = field(default_factory=list)  # missing and not in the zip: left to LINKS
    full: bool = False
    local_error: str | None = None  # why the slim path was not taken, unless asked for
    tally: Tally = field(default_factory=Tally)  # file bytes sent, and skipped as known


def slim_zip(archive: CartonArchive) -> bytes:
    """carton.toml, tensor_data/index.toml, MANIFEST (and LINKS) of a carton, as a zip."""
    members: list[tuple[str, Callable[[], ByteStream], int]] = []
    for path in (CARTON_TOML, TENSOR_INDEX):
        if path in archive.manifest and path in archive.members:
            members.append((path, partial(archive.open_member, path), STORED))
    raw = archive.manifest.raw
    members.append((MANIFEST_NAME, lambda: io.BytesIO(raw), STORED))
    if LINKS_NAME in archive.members:
        members.append((LINKS_NAME, lambda: archive.open_member(LINKS_NAME), STORED))
    out = io.BytesIO()
    write_zip(out, members)
    return out.getvalue()


RECOVERY_ATTEMPTS = 3
"""Rounds of uploading what the registry reports missing before a push gives up."""
VERIFY_WORKERS = min(4, os.cpu_count() or 1)


def _uploads_for(archive: CartonArchive, hashes: list[str]) -> list[tuple[str, str, int]]:
    """(sha256, member, size) for each of ``hashes`` the local zip holds."""
    uploads = []
    for sha in hashes:
        paths = [e.path for e in archive.manifest if e.sha256 == sha and e.path in archive.members]
        if paths:
            uploads.append((sha, paths[0], archive.member_size(paths[0])))
    return uploads


def _verify_all(
    files: LocalCarton, verify: list[tuple[str, str, int]], progress: Progress | None
) -> None:
    """Check each (sha256, member) against MANIFEST, several at once (hashing frees the GIL);
    the first stale member stops the checks not yet started."""
    pool = ThreadPoolExecutor(VERIFY_WORKERS, thread_name_prefix="verify")
    try:
        checks = [pool.submit(files.verify, member, sha, progress) for sha, member, _ in verify]
        for check in as_completed(checks):
            check.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _not_stored_after_all(
    plan: PushPlan, outcome: PushOutcome, lacking: list[tuple[str, str, int]]
) -> None:
    """Count files the plan took as stored, and the POST found missing, as uploads: the
    summary's "already in the registry" and the progress bar's total follow."""
    for upload in lacking:
        if upload in plan.verify:
            plan.verify.remove(upload)
            outcome.tally.add(reused=-upload[2])
        if upload not in plan.uploads:  # GC may take a file again after it was sent
            plan.uploads.append(upload)
    outcome.already_stored = plan.distinct - len(plan.uploads) - len(plan.linked)


class _Collected(Exception):
    """What this push sent or was told is stored kept being collected by GC."""


def push_carton(
    client: RegistryClient,
    path: str | os.PathLike[str],
    *,
    model: str | None = None,
    tag: str | None = None,
    full: bool = False,
    verified: VerifiedCartons | None = None,
    tally: Tally | None = None,
    on_plan: Callable[[PushPlan], None] | None = None,
    on_send_whole: Callable[[str], None] | None = None,
    progress: Progress | None = None,
    namespace: str | None = None,
) -> PushOutcome:
    """Push a local carton, sending only the files and chunks the registry lacks (unless
    ``full``); ``namespace`` puts its model there (``bert`` pushed as ``acme/bert``).

    A file that cannot be read as a carton, or whose carton.toml names another model
    than ``model``, is refused before a byte is sent (ClientError; the registry would
    refuse it with the same words, after the upload). The whole file is sent instead
    (``on_send_whole`` is told why) when GC took what this push relied on in every round of
    recovery (a collector run with no grace period, over and over): one request
    holds everything, so nothing can go missing in between. ``verified``
    remembers cartons whose files were all checked; ``tally`` counts the file
    bytes sent and skipped as they go (``outcome.tally``).
    """
    path = Path(path)
    reason: str | None = None
    checked = verified.state(path) if verified is not None else None  # before any read
    archive = open_local_carton(path, model)
    if full:
        archive.close()
    else:
        try:
            with archive:
                outcome = _push_slim(
                    client,
                    archive,
                    path,
                    (model, tag, namespace),
                    verified,
                    tally,
                    on_plan,
                    progress,
                )
        except _Collected as exc:
            reason = str(exc)
        else:
            if verified is not None and checked is not None:
                verified.remember(path, outcome.manifest_sha256, checked)
            return outcome
        if on_send_whole is not None:
            on_send_whole(reason)
    size = path.stat().st_size
    with path.open("rb") as f:
        response = client.post_carton(
            iter(lambda: f.read(CHUNK), b""),
            size,
            model=model,
            tag=tag,
            namespace=namespace,
            progress=progress,
        )
    outcome = PushOutcome(response["manifest_sha256"], response, full=True, local_error=reason)
    outcome.tally.add(moved=size)
    return outcome


def open_local_carton(path: Path, model: str | None = None) -> CartonArchive:
    """The carton at ``path``, opened as the registry would read it; ClientError naming the
    file when it is no carton, or when ``model`` contradicts its carton.toml's model_name."""
    try:
        archive = CartonArchive.open(path, CLIENT_LIMITS)
    except CartonFormatError as exc:
        raise ClientError(f"{path}: {exc.message}") from exc
    try:
        config = archive.config()
    except CartonFormatError as exc:
        archive.close()
        raise ClientError(f"{path}: {exc.message}") from exc
    named = config.model_name if config is not None else None
    if named and model is not None and names_another_model(named, model):
        archive.close()
        raise ClientError(f"{path}: {model_conflict(named, model)}")
    return archive


def _push_slim(
    client: RegistryClient,
    archive: CartonArchive,
    path: Path,
    naming: tuple[str | None, str | None, str | None],
    verified: VerifiedCartons | None,
    tally: Tally | None,
    on_plan: Callable[[PushPlan], None] | None,
    progress: Progress | None,
) -> PushOutcome:
    """Files the registry lacks (whole or as chunks), then the slim zip; verified locally.

    ``naming``: the push's model, tag and namespace parameters."""
    model, tag, namespace = naming
    if may_presume(archive, path, verified):
        plan = presumed_plan(archive)
        plan.verified_before = True
    else:
        plan = plan_push(client, archive)
        plan.verified_before = verified is not None and verified.verified(
            path, plan.manifest_sha256
        )
    if on_plan is not None:
        on_plan(plan)
    outcome = PushOutcome(plan.manifest_sha256, {}, linked=plan.linked)
    if tally is not None:
        outcome.tally = tally
    outcome.already_stored = plan.distinct - len(plan.uploads) - len(plan.linked)
    files = LocalCarton(archive, path)
    if not plan.verified_before:  # before any upload: a stale file fails fast
        _verify_all(files, plan.verify, progress)
    outcome.tally.add(reused=plan.known_bytes)
    sender = Sender(client, files, outcome, progress)
    try:
        sender.send(plan.uploads)
        body = slim_zip(archive)
        # A presumed plan's first 400 only answers the question it did not ask: not GC's doing.
        rounds = RECOVERY_ATTEMPTS + (1 if plan.presumed else 0)
        for attempt in range(rounds + 1):
            try:
                outcome.response = client.post_carton(
                    [body], len(body), model=model, tag=tag, namespace=namespace
                )
                break
            except ClientError as exc:
                # A file reported present may have been collected by GC since: send it now.
                lacking = _uploads_for(archive, exc.missing)
                if exc.status != 400 or not lacking:
                    raise
                if attempt == rounds:
                    raise _Collected(
                        f"the registry's garbage collector took {len(lacking)} file(s) this "
                        f"push relied on, {RECOVERY_ATTEMPTS + 1} times over"
                    ) from exc
                _not_stored_after_all(plan, outcome, lacking)
                if on_plan is not None:
                    on_plan(plan)
                sender.send(lacking)
    except ClientError as exc:
        if exc.status == 400 and exc.missing_chunks:  # still lacking after ASSEMBLE_ROUNDS
            raise _Collected(
                f"the registry's garbage collector took chunks this push had sent ({exc.message})"
            ) from exc
        raise
    finally:
        sender.close()
        files.close()
    if outcome.response.get("manifest_sha256") != outcome.manifest_sha256:
        raise ClientError(
            f"the registry stored manifest {outcome.response.get('manifest_sha256')}, "
            f"expected {outcome.manifest_sha256}"
        )
    return outcome
