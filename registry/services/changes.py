"""A process-local generation number, bumped whenever this process changes the index.

Caches of derived figures (the web pages' totals) key on it, so this
process never shows figures older than its own writes; other processes'
writes show up when the cache's short TTL runs out.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_lock = threading.Lock()
_counter = itertools.count(1)
_generation = 0


def bump() -> None:
    global _generation
    with _lock:
        _generation = next(_counter)


def generation() -> int:
    return _generation


def bumps(func: Callable[P, R]) -> Callable[P, R]:
    """Bump after ``func`` returns, i.e. after the transaction it ran has committed."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        finally:
            bump()

    return wrapper
