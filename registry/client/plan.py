"""What a push will send: the files the registry lacks, and those it only reads to verify.

``plan_push`` asks the registry (``blobs/missing``); ``presumed_plan`` does not, for a
carton file verified by an earlier push (most likely a re-push): every file is presumed
stored, and the slim POST's 400 names what is not (``registry.client.push``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from registry.carton.paths import LINKS_NAME
from registry.carton.zipread import CartonArchive
from registry.client.cache import VerifiedCartons
from registry.client.transport import RegistryClient


@dataclass
class PushPlan:
    """What a push will upload, and what it only reads to verify: (sha256, path in zip, size)."""

    manifest_sha256: str
    distinct: int
    uploads: list[tuple[str, str, int]]
    linked: list[str]
    verify: list[tuple[str, str, int]] = field(default_factory=list)
    verified_before: bool = False  # this very file was verified by an earlier push
    # The registry was not asked what it lacks (``presumed_plan``): every file is taken as
    # stored, and the slim POST's 400 names what is not.
    presumed: bool = False

    @property
    def upload_bytes(self) -> int:
        return sum(size for _, _, size in self.uploads)

    @property
    def known_bytes(self) -> int:
        """Bytes of the zip's files that the registry holds already (or that repeat one)."""
        return sum(size for _, _, size in self.verify)

    @property
    def read_bytes(self) -> int:
        """Every byte the push reads from the zip: uploaded or only verified."""
        return self.upload_bytes + (0 if self.verified_before else self.known_bytes)


def plan_push(client: RegistryClient, archive: CartonArchive) -> PushPlan:
    """The plan from the registry's answer to ``blobs/missing``."""
    distinct = dict.fromkeys(entry.sha256 for entry in archive.manifest)
    return _plan(archive, set(client.missing_blobs(distinct)))


def presumed_plan(archive: CartonArchive) -> PushPlan:
    """The plan of a re-push that does not ask (one round trip fewer): every file presumed
    stored. The slim POST checks that anyway and answers 400 with the files it lacks,
    which ``_push_slim`` then uploads, as it does for files GC took after the question."""
    plan = _plan(archive, set())
    plan.presumed = True
    return plan


def _plan(archive: CartonArchive, wanted: set[str]) -> PushPlan:
    """The plan given the files the registry lacks (``wanted``)."""
    by_sha: dict[str, list[str]] = {}
    for entry in archive.manifest:
        by_sha.setdefault(entry.sha256, []).append(entry.path)
    uploads: list[tuple[str, str, int]] = []
    linked: list[str] = []
    verify: list[tuple[str, str, int]] = []
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


def may_presume(archive: CartonArchive, path: Path, verified: VerifiedCartons | None) -> bool:
    """Whether a push may skip asking what the registry lacks: this very file was verified
    by an earlier push (so it is most likely a re-push), and it has no LINKS (the registry
    would fetch a file it lacks through LINKS instead of saying so; asking first lets the
    client upload what it holds)."""
    if verified is None or LINKS_NAME in archive.members:
        return False
    return verified.verified(path, archive.manifest_sha256)


def unknown_files(client: RegistryClient, probes: dict[str, list[str]], max_query: int) -> set[str]:
    """Of the files probed (sha256 -> its probe's chunk names: ``chunks.probe_names``),
    those the registry holds none of the probed chunks of, in one question (``max_query``
    names at a time): nothing of them is worth negotiating, so they go whole."""
    asked = list(dict.fromkeys(name for names in probes.values() for name in names))
    missing: set[str] = set()
    for start in range(0, len(asked), max_query):
        missing.update(client.missing_chunks(asked[start : start + max_query]))
    return {sha for sha, names in probes.items() if names and missing.issuperset(names)}
