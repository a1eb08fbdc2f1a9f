"""What a registry keeps in memory between calls; one ``Caches`` per ``RegistryContext``.

- ``facts``: what the read path answers from (``ReadFacts``): stored blobs' sizes,
  rebuilt-carton layouts and small cartons' bytes, small blobs' verified bytes, valid
  tokens' scopes; all
  immutable while the shared index generation stays the same
  (``registry.services.freshness`` says how every process learns that it changed);
- ``totals``: the index totals shown in page headers, reused for a few seconds;
- ``storage``: the heavy ``/stats`` aggregates, refreshed in the background;
- ``version_shares``: (previous, next manifest) -> (bytes shared, bytes of the next),
  for the model pages (``chunk_savings``): a carton's files never change, so neither
  does the figure;
- ``local_generation``: bumped whenever a verb changes the index through this context.
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
    from registry.services.auth import Grant
    from registry.services.chunkstore.reader import StoredFile
    from registry.services.context import RegistryContext
    from registry.services.export import ExportedCarton

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
P = ParamSpec("P")
R = TypeVar("R")

SMALL_BLOBS_MAX_BYTES = 32 * MiB
LAYOUTS_MAX = 256  # a layout holds sizes and CRCs, and a small carton's bytes (<= 256 KiB)
STORED_BLOBS_MAX = 65536  # about 200 bytes each
TOKENS_MAX = 4096
VERSION_SHARES_MAX = 4096
# How long a process trusts the shared generation it read; a verb that bumps it waits
# this long after committing (``registry.services.freshness``).
GENERATION_TRUST_SECONDS = 0.05
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

    def __len__(self) -> int:
        return len(self._items)


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


class ReadFacts:
    """Facts read under one shared index generation, dropped together when it changes.

    ``generation`` is the value last read from the database, trusted until
    ``trusted_until`` (``time.monotonic()``); ``current()`` answers without I/O, None
    once the trust has run out. A value loaded under an older generation is not kept
    (``remember``), so a load racing with a change never outlives it.
    """

    def __init__(self, trust_seconds: float = GENERATION_TRUST_SECONDS) -> None:
        self.trust_seconds = trust_seconds
        self.generation: int | None = None
        self.trusted_until = 0.0
        self.refresh_lock = threading.Lock()  # one reader of the database at a time
        self._lock = threading.Lock()
        self.blobs: LruCache[str, StoredFile] = LruCache(STORED_BLOBS_MAX)
        self.compressible: LruCache[str, bool] = LruCache(STORED_BLOBS_MAX)
        self.cartons: LruCache[tuple[str, str], ExportedCarton] = LruCache(LAYOUTS_MAX)
        self.small_blobs: LruCache[str, bytes] = LruCache(SMALL_BLOBS_MAX_BYTES, weigh=len)
        self.tokens: LruCache[str, Grant] = LruCache(TOKENS_MAX)
        # The private namespaces' names (one entry); visibility changes bump the generation.
        self.private: LruCache[str, frozenset[str]] = LruCache(1)

    def current(self) -> int | None:
        """The trusted generation, or None when it must be read again (no I/O)."""
        if time.monotonic() < self.trusted_until:
            return self.generation
        return None

    def distrust(self) -> None:
        """Read the generation again at the next request: this process just bumped it (a
        damaged blob recorded), and must not serve the facts it kept for a moment longer."""
        with self._lock:
            self.trusted_until = 0.0

    def adopt(self, generation: int, read_at: float) -> None:
        """``generation`` was read by a query sent at ``read_at``: trust it from then on."""
        with self._lock:
            if generation != self.generation:
                for cache in (
                    self.blobs,
                    self.compressible,
                    self.cartons,
                    self.small_blobs,
                    self.tokens,
                    self.private,
                ):
                    cache.clear()
                self.generation = generation
            self.trusted_until = read_at + self.trust_seconds

    def remember(self, cache: LruCache[K, V], key: K, value: V, generation: int) -> None:
        """Keep ``value``, loaded under ``generation``, unless the generation moved since."""
        with self._lock:
            if generation == self.generation:
                cache.put(key, value)


class Caches:
    """A plain class, not a dataclass: Litestar's signature model introspects the context's
    dataclass fields, and these annotations name types only known to type checkers."""

    def __init__(self) -> None:
        self.facts = ReadFacts()
        self.totals: Expiring[dict[str, Any]] = Expiring(TOTALS_TTL_SECONDS)
        self.storage = BackgroundValue()
        self.version_shares: LruCache[tuple[str, str], tuple[int, int]] = LruCache(
            VERSION_SHARES_MAX
        )
        self.local_generation = 0
        self._generation_lock = threading.Lock()

    def index_changed(self) -> None:
        with self._generation_lock:
            self.local_generation += 1


def changes_index(
    func: Callable[Concatenate[RegistryContext, P], R],
) -> Callable[Concatenate[RegistryContext, P], R]:
    """Bump the context's local generation once ``func(ctx, ...)`` is over (committed or not)."""

    @functools.wraps(func)
    def wrapper(ctx: RegistryContext, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(ctx, *args, **kwargs)
        finally:
            ctx.caches.index_changed()

    return wrapper
