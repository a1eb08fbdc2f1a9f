"""Push: ask which blobs the registry lacks, upload those, then post a slim zip.

The slim zip (carton.toml, tensor index, MANIFEST, LINKS) lets the registry
validate and index the carton from blobs it already holds. Every file the zip
holds is hashed on the way, uploaded or not: the registry never sees the bytes
of a file it already has, so only the client can tell that the local file no
longer matches its MANIFEST.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from registry.carton.digests import mismatch_message
from registry.carton.errors import CartonFormatError
from registry.carton.manifest import LINKS_NAME, MANIFEST_NAME
from registry.carton.member import MemberReader
from registry.carton.paths import CARTON_TOML, TENSOR_INDEX
from registry.carton.streams import CHUNK
from registry.carton.zipread import CartonArchive
from registry.carton.zipwrite import STORED, write_zip
from registry.client.files import CLIENT_LIMITS
from registry.client.transport import ClientError, Progress, RegistryClient


@dataclass
class PushOutcome:
    manifest_sha256: str
    response: dict[str, Any]
    uploaded_blobs: int = 0
    uploaded_bytes: int = 0
    already_stored: int = 0
    linked: list[str] = field(default_factory=list)  # missing and not in the zip: left to LINKS
    full: bool = False
    local_error: str | None = None  # why the slim path was not taken


@dataclass
class PushPlan:
    """What a push will upload, and what it only reads to verify: (sha256, path in zip, size)."""

    manifest_sha256: str
    distinct: int
    uploads: list[tuple[str, str, int]]
    linked: list[str]
    verify: list[tuple[str, str, int]] = field(default_factory=list)

    @property
    def upload_bytes(self) -> int:
        return sum(size for _, _, size in self.uploads)

    @property
    def read_bytes(self) -> int:
        """Every byte the push reads from the zip: uploaded or only verified."""
        return self.upload_bytes + sum(size for _, _, size in self.verify)


def plan_push(client: RegistryClient, archive: CartonArchive) -> PushPlan:
    by_sha: dict[str, list[str]] = {}
    for entry in archive.manifest:
        by_sha.setdefault(entry.sha256, []).append(entry.path)
    missing = client.missing_blobs(by_sha)
    uploads: list[tuple[str, str, int]] = []
    linked: list[str] = []
    verify: list[tuple[str, str, int]] = []
    wanted = set(missing)
    for sha, paths in by_sha.items():
        present = [p for p in paths if p in archive.members]
        if sha in wanted and not present:
            linked.append(sha)
            continue
        if sha in wanted:
            uploads.append((sha, present[0], archive.member_size(present[0])))
            present = present[1:]
        verify.extend((sha, p, archive.member_size(p)) for p in present)
    return PushPlan(archive.manifest_sha256, len(by_sha), uploads, linked, verify)


def _verified(reader: MemberReader, path: Path, member: str, sha256: str) -> Iterator[bytes]:
    """The member's bytes; at the end, ClientError naming both files unless they hash right."""
    digest = hashlib.sha256()
    for chunk in reader.iter_chunks(CHUNK):
        digest.update(chunk)
        yield chunk
    if digest.hexdigest() != sha256:
        raise ClientError(f"{path}: {mismatch_message(member, digest.hexdigest(), sha256)}")


def slim_zip(archive: CartonArchive) -> bytes:
    """carton.toml, tensor_data/index.toml, MANIFEST (and LINKS) of a carton, as a zip."""
    members: list[tuple[str, Callable[[], BinaryIO], int]] = []
    for path in (CARTON_TOML, TENSOR_INDEX):
        if path in archive.manifest and path in archive.members:
            members.append((path, lambda p=path: archive.open_member(p), STORED))  # type: ignore[misc]
    raw = archive.manifest.raw
    members.append((MANIFEST_NAME, lambda: io.BytesIO(raw), STORED))
    if LINKS_NAME in archive.members:
        members.append((LINKS_NAME, lambda: archive.open_member(LINKS_NAME), STORED))
    out = io.BytesIO()
    write_zip(out, members)
    return out.getvalue()


RECOVERY_ATTEMPTS = 3
"""Rounds of uploading what the registry reports missing before a push gives up."""


def _uploads_for(archive: CartonArchive, hashes: list[str]) -> list[tuple[str, str, int]]:
    """(sha256, member, size) for each of ``hashes`` the local zip holds."""
    uploads = []
    for sha in hashes:
        paths = [e.path for e in archive.manifest if e.sha256 == sha and e.path in archive.members]
        if paths:
            uploads.append((sha, paths[0], archive.member_size(paths[0])))
    return uploads


def _upload(
    client: RegistryClient,
    archive: CartonArchive,
    path: Path,
    uploads: list[tuple[str, str, int]],
    outcome: PushOutcome,
    progress: Progress | None,
) -> None:
    """PUT each blob, checked against its MANIFEST sha256 as it is read (``_verified``)."""
    for sha, member, member_size in uploads:
        with archive.open_member(member) as reader:
            client.put_blob(sha, _verified(reader, path, member, sha), member_size, progress)
        outcome.uploaded_blobs += 1
        outcome.uploaded_bytes += member_size


def push_carton(
    client: RegistryClient,
    path: str | os.PathLike[str],
    *,
    model: str | None = None,
    tag: str | None = None,
    full: bool = False,
    on_plan: Callable[[PushPlan], None] | None = None,
    on_local_error: Callable[[str], None] | None = None,
    progress: Progress | None = None,
) -> PushOutcome:
    """Push a local carton, sending only the blobs the registry lacks (unless ``full``).

    A file that cannot be read locally as a carton is sent whole, so the
    registry's own validation gives the verdict.
    """
    path = Path(path)
    size = path.stat().st_size
    archive: CartonArchive | None = None
    local_error: str | None = None
    if not full:
        try:
            archive = CartonArchive.open(path, CLIENT_LIMITS)
        except CartonFormatError as exc:
            local_error = exc.message
            if on_local_error is not None:
                on_local_error(local_error)
    if archive is None:
        with path.open("rb") as f:
            response = client.post_carton(
                iter(lambda: f.read(CHUNK), b""), size, model=model, tag=tag, progress=progress
            )
        return PushOutcome(
            response["manifest_sha256"], response, full=True, local_error=local_error
        )
    with archive:
        plan = plan_push(client, archive)
        if on_plan is not None:
            on_plan(plan)
        outcome = PushOutcome(plan.manifest_sha256, {}, linked=plan.linked)
        outcome.already_stored = plan.distinct - len(plan.uploads) - len(plan.linked)
        for sha, member, _ in plan.verify:  # before any upload: a stale file fails fast
            with archive.open_member(member) as reader:
                for chunk in _verified(reader, path, member, sha):
                    if progress is not None:
                        progress(len(chunk))
        _upload(client, archive, path, plan.uploads, outcome, progress)
        body = slim_zip(archive)
        for attempt in range(RECOVERY_ATTEMPTS + 1):
            try:
                outcome.response = client.post_carton([body], len(body), model=model, tag=tag)
                break
            except ClientError as exc:
                # A file reported present may have been collected by GC since: send it now.
                lacking = _uploads_for(archive, exc.missing)
                if attempt == RECOVERY_ATTEMPTS or not lacking or exc.status != 400:
                    raise
                _upload(client, archive, path, lacking, outcome, progress)
    if outcome.response.get("manifest_sha256") != outcome.manifest_sha256:
        raise ClientError(
            f"the registry stored manifest {outcome.response.get('manifest_sha256')}, "
            f"expected {outcome.manifest_sha256}"
        )
    return outcome
