"""How service answers spell values that JSON has no type for."""

from __future__ import annotations

from datetime import datetime


def iso(value: datetime | None) -> str | None:
    """A timestamp as ISO 8601 text (None stays None)."""
    return value.isoformat() if value is not None else None
