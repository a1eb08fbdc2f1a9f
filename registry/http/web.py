"""Routes: filled in by the web work."""

from __future__ import annotations

from typing import Any

ROUTES: list[Any] = []
