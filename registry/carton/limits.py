"""The limits an untrusted archive is held to (DESIGN.md "Default limits").

The defaults here are the registry's defaults too: ``registry.settings`` reads them from
``ArchiveLimits()`` so each number is written once.
"""

from __future__ import annotations

from dataclasses import dataclass

from .streams import GiB, KiB, MiB

MAX_CARTON_TOML_BYTES = 1 * MiB
"""carton.toml is parsed in memory: never more than this, whatever the configured limit."""


@dataclass(frozen=True)
class ArchiveLimits:
    """Limits enforced when an archive is opened."""

    max_members: int = 10_000
    max_unpacked_bytes: int = 256 * GiB
    max_compression_ratio: float = 1000.0
    compression_ratio_min_bytes: int = 16 * MiB
    # A whole archive unpacks to at most this many times its own size (past a floor):
    # many small members under the per-member floor cannot amplify an upload either.
    max_expansion_ratio: float = 100.0
    expansion_min_bytes: int = 256 * MiB
    max_carton_toml_bytes: int = MAX_CARTON_TOML_BYTES
    max_manifest_bytes: int = 16 * MiB
    max_links_bytes: int = 16 * MiB
    # Bytes of central directory allowed per permitted member (bounds parse memory).
    max_central_directory_bytes_per_member: int = 4 * KiB
