"""Callbacks told about pushes, GC runs and integrity checks (``registry.http.metrics``
registers its counters here).

They hang on the ``RegistryContext``, so every registry in a process has its own; a
callback that fails is logged and never fails the verb it observes. (A plain class, not
a dataclass: Litestar's signature model introspects the context's dataclass fields.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from registry.services.fsck import FsckReport
    from registry.services.gc import GcReport
    from registry.services.ingest import PushResult

log = logging.getLogger("registry.observers")


class Observers:
    def __init__(self) -> None:
        self.push: list[Callable[[PushResult], None]] = []
        """Called after every successful push."""
        self.gc: list[Callable[[GcReport | None, str], None]] = []
        """Called after every GC run with (report or None, outcome)."""
        self.fsck: list[Callable[[FsckReport], None]] = []
        """Called with every integrity report."""
        self.damage: list[Callable[[str, str, int], None]] = []
        """Called with (reason, found_by, count) when damaged chunks are recorded."""
        self.damaged_blobs: list[Callable[[str, str, int], None]] = []
        """Called with (reason, found_by, count) when damaged whole blobs are recorded."""


def notify(callbacks: list[Callable[..., None]], *args: Any) -> None:
    for callback in list(callbacks):
        try:
            callback(*args)
        except Exception:  # metrics never fail a push, a GC or a check
            log.exception("observer %r failed", callback)
