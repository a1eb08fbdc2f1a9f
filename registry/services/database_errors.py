"""Database errors that mean "busy" or "unreachable", as the registry's own errors.

A lock wait that runs out (SQLite's ``database is locked`` after its busy timeout,
Postgres's ``lock_timeout`` or ``statement_timeout``, a deadlock or serialization
failure) or a connection pool with no free connection is overload: ``Overloaded``. Any
other operational error (the server is down, the connection dropped) is
``StorageUnavailable``. Both answer 503 with ``Retry-After``, never 500: the same
request may well succeed a little later. The HTTP edge translates with
``as_registry_error`` in one place (``registry.http.errors``).
"""

from __future__ import annotations

from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from registry.errors import Overloaded, StorageUnavailable, Unavailable

DATABASE_ERRORS: tuple[type[Exception], ...] = (OperationalError, PoolTimeout)
RETRY_AFTER_SECONDS = 5

# lock_not_available, query_canceled (statement/lock timeout), deadlock, serialization.
_BUSY_SQLSTATES = frozenset({"55P03", "57014", "40P01", "40001"})
_SQLITE_BUSY = ("database is locked", "database table is locked", "database is busy")


def is_busy(exc: Exception) -> bool:
    """A lock or pool wait that ran out: the database works, it is only too busy now."""
    if isinstance(exc, PoolTimeout):
        return True
    orig = getattr(exc, "orig", None)
    if getattr(orig, "sqlstate", None) in _BUSY_SQLSTATES:
        return True
    return any(text in str(orig) for text in _SQLITE_BUSY)


def as_registry_error(exc: Exception) -> Unavailable:
    """The registry error a ``DATABASE_ERRORS`` exception answers as."""
    if is_busy(exc):
        return Overloaded(
            "the database is busy (a lock or connection wait timed out); retry later",
            retry_after=RETRY_AFTER_SECONDS,
        )
    return StorageUnavailable(
        "the database is unavailable; retry later", retry_after=RETRY_AFTER_SECONDS
    )
