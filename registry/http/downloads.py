"""Routes: filled in by the downloads work."""

from __future__ import annotations

from typing import Any

ROUTES: list[Any] = []
