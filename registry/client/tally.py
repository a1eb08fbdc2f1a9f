"""What a transfer moved and what it did not have to move (``Tally``), shared by push, pull
and hydrate; ``registry.client.transport`` exports it where callers import it."""

from __future__ import annotations

import threading
from typing import Any


class Tally:
    """Bytes of file content a transfer moved, and bytes it did not have to move.

    A push counts what it ``moved`` to the registry and what it skipped as already
    there (``reused``); a pull, what it received and what the local cache held.
    Updated by several threads at once.
    """

    def __init__(self) -> None:
        self.moved = 0
        self.reused = 0
        self.stored = 0  # of ``moved``: what the registry said it really stored (chunk dedup)
        self.healed = 0  # of ``moved``: written again in place of damaged copies
        self.new_files = 0  # bytes of files the registry said an upload created
        self._lock = threading.Lock()

    def add(
        self,
        *,
        moved: int = 0,
        reused: int = 0,
        stored: int = 0,
        healed: int = 0,
        new_files: int = 0,
    ) -> None:
        with self._lock:
            self.moved += moved
            self.reused += reused
            self.stored += stored
            self.healed += healed
            self.new_files += new_files

    def add_upload(self, size: int, answer: dict[str, Any]) -> None:
        """A whole-file upload of ``size`` bytes and the registry's answer to it: what it
        stored after chunk dedup, wrote in place of damaged copies, and whether it made a
        new file."""
        self.add(
            moved=size,
            stored=int(answer.get("bytes_stored") or 0),
            healed=int(answer.get("bytes_healed") or 0),
            new_files=size if answer.get("created") else 0,
        )
