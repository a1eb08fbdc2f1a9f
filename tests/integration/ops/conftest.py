"""Fixtures for the operations tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from registry.services.context import RegistryContext


@pytest.fixture
def ops_client(registry_ctx: RegistryContext) -> Iterator[object]:
    from litestar.testing import TestClient

    from tests.conftest import app_for

    with (
        app_for(registry_ctx) as app,
        TestClient(app, base_url=registry_ctx.settings.public_url) as c,
    ):
        yield c
