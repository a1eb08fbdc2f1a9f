"""What a registry keeps in memory between calls; one ``Caches`` per ``RegistryContext``.

- ``small_blobs``: bytes of small blobs, which slim cartons inline (content-addressed,
  so never stale), bounded in bytes;
- ``layouts``: rebuilt-carton layouts by (manifest hash, form), valid for the context's
  settings and store (carton rows are still checked on every use);
- ``totals``: the index totals shown in page headers, reused for a few seconds;
- ``storage``: the heavy ``/stats`` aggregates, refreshed in the background;
- ``version_shares``: (previous, next manifest) -> (bytes shared, bytes of the next),
  for the model pages (``chunk_savings``): a carton's files never change, so neither
  does the figure;
- ``generation``: bumped whenever a verb changes the index through this context.
  ``totals`` keys on it, so a process never shows figures older than its own writes;
  other processes' writes show up when the TTL runs out.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar

from registry.carton.streams import MiB

if TYPE_CHECKING:
    from registry.services.context import RegistryContext
    from registry.services.export import ExportedCarton

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
P = ParamSpec("P")
R = TypeVar("R")

SMALL_BLOBS_MAX_BYTES = 32 * MiB
LAYOUTS_MAX = 256  # a layout holds sizes, CRCs and readers, not blob bytes
VERSION_SHARES_MAX = 4096
TOTALS_TTL_SECONDS = 5.0


class LruCache(Generic[K, V]):
    """Least recently used entries go first once the weights add up past ``max_weight``.

    Each entry weighs ``weigh(value)`` (1 by default: a bound on the count); a value
    heavier than the whole cache is not kept.
    """

    def __init__(self, max_weight: int, weigh: Callable[[V], int] = lambda _value: 1) -> None:
        self.max_weight = max_weight
        self._weigh = weigh
        self._items: OrderedDict[K, V] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        weight = self._weigh(value)
        if weight > self.max_weight:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._weight -= self._weigh(old)
            self._items[key] = value
            self._weight += weight
            while self._weight > self.max_weight:
                _, evicted = self._items.popitem(last=False)
                self._weight -= self._weigh(evicted)

    def drop(self, key: K) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._weight -= self._weigh(old)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._weight = 0


@dataclass
class Expiring(Generic[V]):
    """One value, good while its key is unchanged and it is younger than ``ttl`` seconds."""

    ttl: float
    _entry: tuple[Hashable, float, V] | None = None

    def get(self, key: Hashable) -> V | None:
        entry = self._entry
        if entry is None or entry[0] != key or time.monotonic() - entry[1] >= self.ttl:
            return None
        return entry[2]

    def put(self, key: Hashable, value: V) -> None:
        self._entry = (key, time.monotonic(), value)


@dataclass
class BackgroundValue:
    """A value computed in a background thread, tagged with the inputs it was computed for."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    fingerprint: tuple[Any, ...] | None = None
    value: dict[str, Any] | None = None
    computed_at: datetime | None = None
    running: tuple[tuple[Any, ...], threading.Event] | None = None


class Caches:
    """A plain class, not a dataclass: Litestar's signature model introspects the context's
    dataclass fields, and these annotations name types only known to type checkers."""

    def __init__(self) -> None:
        self.small_blobs: LruCache[str, bytes] = LruCache(SMALL_BLOBS_MAX_BYTES, weigh=len)
        self.layouts: LruCache[tuple[str, str], ExportedCarton] = LruCache(LAYOUTS_MAX)
        self.totals: Expiring[dict[str, Any]] = Expiring(TOTALS_TTL_SECONDS)
        self.storage = BackgroundValue()
        self.version_shares: LruCache[tuple[str, str], tuple[int, int]] = LruCache(
            VERSION_SHARES_MAX
        )
        self.generation = 0
        self._generation_lock = threading.Lock()

    def index_changed(self) -> None:
        with self._generation_lock:
            self.generation += 1


def changes_index(
    func: Callable[Concatenate[RegistryContext, P], R],
) -> Callable[Concatenate[RegistryContext, P], R]:
    """Bump the context's generation once ``func(ctx, ...)`` is over (committed or not)."""

    @functools.wraps(func)
    def wrapper(ctx: RegistryContext, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(ctx, *args, **kwargs)
        finally:
            ctx.caches.index_changed()

    return wrapper
