"""``ctx``: a registry on the memory blob store and a migrated SQLite file, one per test.

``@pytest.mark.settings(**overrides)`` changes its settings, as for the integration tests.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry.services.context import RegistryContext
from registry.services.ingest import PushResult, ingest_file
from registry.settings import Settings

PUBLIC_URL = "http://registry.test"


@pytest.fixture
def ctx(
    request: pytest.FixtureRequest, sqlite_template: Path, tmp_path: Path
) -> Iterator[RegistryContext]:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    shutil.copy(sqlite_template, data_dir / "registry.db")
    marker = request.node.get_closest_marker("settings")
    overrides = dict(marker.kwargs) if marker is not None else {}
    overrides.setdefault("public_url", PUBLIC_URL)
    settings = Settings(
        data_dir=data_dir,
        blob_store="memory://",
        migrate_on_start=False,
        **overrides,  # type: ignore[arg-type]
    )
    context = RegistryContext.open(settings)
    try:
        yield context
    finally:
        context.close()


@pytest.fixture
def push(ctx: RegistryContext, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Push carton bytes (or a carton file) through ``ingest_file``, as the HTTP layer does."""
    counter = iter(range(1_000_000))

    def push_carton(data: bytes | Path, **params: str | None) -> PushResult:
        path = data if isinstance(data, Path) else tmp_path / f"push-{next(counter)}.carton"
        if not isinstance(data, Path):
            path.write_bytes(data)
        return ingest_file(ctx, path, **params)  # type: ignore[arg-type]

    return push_carton
