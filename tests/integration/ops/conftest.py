"""Fixtures for the operations tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from registry.services.context import RegistryContext


def make_ops_app(ctx: RegistryContext):  # type: ignore[no-untyped-def]
    from registry.app import create_app

    return create_app(ctx=ctx)


@pytest.fixture
def ops_client(registry_ctx: RegistryContext) -> Iterator[object]:
    from litestar.testing import TestClient

    with TestClient(make_ops_app(registry_ctx), base_url=registry_ctx.settings.public_url) as c:
        yield c
