"""Fixtures for the carton format tests (fixture dir: CARTON_FIXTURES or ../shared/fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .carton_testlib import FIXTURES


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(f"carton fixtures not found at {FIXTURES} (set CARTON_FIXTURES)")
    return FIXTURES
