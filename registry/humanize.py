"""Sizes, times and shares as people read them: one spelling for the web pages and the CLI.

A leaf module (standard library only), so the command line can use it without loading
anything of the server.
"""

from __future__ import annotations

from datetime import UTC, datetime

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_AGES = (
    (86400 * 365, "year"),
    (86400 * 30, "month"),
    (86400, "day"),
    (3600, "hour"),
    (60, "minute"),
)


def human_bytes(n: int | None, missing: str = "-") -> str:
    """``1.5 KiB``, ``230 MiB``: three significant digits at most; ``missing`` for None."""
    if n is None:
        return missing
    value = float(n)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            if unit == "B":
                return f"{int(value)} B"
            return f"{value:.1f} {unit}" if value < 100 else f"{value:.0f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def percent(value: float) -> str:
    """A share in percent, never rounded to a misleading ``0%`` or ``100%``."""
    if 0 < value < 1:
        return "<1%"
    if 99 < value < 100:
        return ">99%"
    return f"{value:.0f}%"


def parse_time(value: str | datetime | None) -> datetime | None:
    """An API timestamp (ISO 8601, naive means UTC) as an aware datetime."""
    if value is None:
        return None
    when = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def absolute_time(value: str | datetime | None, missing: str = "-") -> str:
    when = parse_time(value)
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if when else missing


def relative_time(value: str | datetime | None, missing: str = "-") -> str:
    """``just now``, ``5 minutes ago``, ``2 days ago``."""
    when = parse_time(value)
    if when is None:
        return missing
    seconds = int((datetime.now(UTC) - when).total_seconds())
    for size, unit in _AGES:
        if seconds >= size:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''} ago"
    return "just now"
