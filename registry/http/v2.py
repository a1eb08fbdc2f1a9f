"""Routes: filled in by the v2 work."""

from __future__ import annotations

from typing import Any

ROUTES: list[Any] = []
