"""The limits an untrusted archive is held to (DESIGN.md "Default limits").

The registry's settings hold one ``ArchiveLimits`` (``Settings.archive``): each field
here is a setting of its own, ``REGISTRY_<FIELD>``, so each limit is written once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from .streams import GiB, KiB, MiB

T = TypeVar("T")

MAX_CARTON_TOML_BYTES = 1 * MiB
"""carton.toml is parsed in memory: never more than this, whatever the configured limit."""


def _limit(default: T, help: str) -> T:
    """A limit with the help text the registry's settings listing prints for it."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class ArchiveLimits:
    """Limits enforced when an archive is opened.

    The registry holds one (``Settings.archive``): each field is the setting
    ``REGISTRY_<FIELD>``, listed with the help text in its metadata.
    """

    max_members: int = _limit(10_000, "members (zip entries) an archive may have (413)")
    max_unpacked_bytes: int = _limit(256 * GiB, "bytes an archive may unpack to (413)")
    max_compression_ratio: float = _limit(
        1000.0,
        "a compressed member larger than `COMPRESSION_RATIO_MIN_BYTES` may unpack to at most "
        "this many times its compressed size (413; small all-zero files are legitimate)",
    )
    compression_ratio_min_bytes: int = _limit(16 * MiB, "see `MAX_COMPRESSION_RATIO`")
    # A whole archive unpacks to at most this many times its own size (past a floor):
    # many small members under the per-member floor cannot amplify an upload either.
    max_expansion_ratio: float = _limit(
        100.0,
        "a push whose zip unpacks to more than this many times the bytes received so far "
        "is refused (413), past its first `EXPANSION_MIN_BYTES`",
    )
    expansion_min_bytes: int = _limit(256 * MiB, "see `MAX_EXPANSION_RATIO`")
    max_carton_toml_bytes: int = _limit(
        MAX_CARTON_TOML_BYTES, "carton.toml's size (413; never more than 1 MiB)"
    )
    max_manifest_bytes: int = _limit(16 * MiB, "MANIFEST's size (413)")
    max_links_bytes: int = _limit(16 * MiB, "LINKS' size (413)")
    # Bytes of central directory allowed per permitted member (bounds parse memory).
    max_central_directory_bytes_per_member: int = _limit(
        4 * KiB,
        "central directory bytes allowed per permitted member (at least 1 MiB in all): "
        "bounds the memory parsing it takes",
    )
