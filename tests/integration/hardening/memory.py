"""Peak resident memory of this process while a block runs (the live server is in it)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

MiB = 1024 * 1024


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@dataclass
class Peak:
    baseline: int = 0
    peak: int = 0

    @property
    def growth(self) -> int:
        return self.peak - self.baseline


@contextmanager
def peak_rss(interval: float = 0.01) -> Iterator[Peak]:
    """Sample RSS every ``interval`` seconds; ``growth`` is the peak over the start."""
    result = Peak(baseline=rss_bytes(), peak=rss_bytes())
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            result.peak = max(result.peak, rss_bytes())
            time.sleep(interval)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield result
    finally:
        done.set()
        thread.join()
        result.peak = max(result.peak, rss_bytes())
