"""Cartons by hash prefix, and opening only a registry that exists and is migrated."""

from __future__ import annotations

import pytest

from registry.db.engine import make_engine
from registry.db.migrate import upgrade
from registry.db.tables import Carton
from registry.errors import AmbiguousReference, CartonNotFound, InvalidDigest, StorageNotReady
from registry.services import cartons
from registry.services.context import RegistryContext
from registry.settings import Settings
from tests.helpers import make_carton


def add_bare_carton(ctx: RegistryContext, manifest_sha256: str) -> None:
    with ctx.transaction() as session:
        session.add(
            Carton(
                manifest_sha256=manifest_sha256,
                manifest=b"",
                carton_toml="spec_version = 1\n",
                spec_version=1,
                file_count=0,
                total_bytes=0,
            )
        )


def test_a_carton_by_hash_digest_reference_or_unique_prefix(ctx, push) -> None:
    sha = push(make_carton({"w": b"1"}, model_name="m")).manifest_sha256
    for ref in (sha, f"sha256:{sha}", sha[:8], f"sha256:{sha[:12]}"):
        assert cartons.get_carton(ctx, ref)["manifest_sha256"] == sha, ref
    for bad in (sha[:7], "sha256:", "ABCDEF01", "not-a-hash", sha + "0"):
        with pytest.raises(InvalidDigest):
            cartons.get_carton(ctx, bad)
    other = "0" if sha[0] != "0" else "1"
    with pytest.raises(CartonNotFound, match="no carton's manifest hash starts with"):
        cartons.get_carton(ctx, other * 8)


def test_a_prefix_several_cartons_share_is_ambiguous(ctx) -> None:
    for tail in ("0" * 56, "1" * 56, "2" * 56):
        add_bare_carton(ctx, "abcdef01" + tail)
    with ctx.sessions() as session:
        with pytest.raises(AmbiguousReference, match=r"abcdef01000.*abcdef01111.*more digits"):
            cartons.find_carton_row(session, "abcdef01")
        assert (
            cartons.find_carton_row(session, "abcdef012").manifest_sha256 == "abcdef01" + "2" * 56
        )


def test_open_existing_refuses_what_is_not_a_registry_and_creates_nothing(tmp_path) -> None:
    missing = Settings(data_dir=tmp_path / "nowhere")
    with pytest.raises(StorageNotReady, match="does not exist"):
        RegistryContext.open_existing(missing)
    assert not (tmp_path / "nowhere").exists()

    (tmp_path / "empty.db").touch()
    with pytest.raises(StorageNotReady, match="holds no registry tables"):
        RegistryContext.open_existing(Settings(database_url=f"sqlite:///{tmp_path / 'empty.db'}"))

    old = tmp_path / "old.db"
    engine = make_engine(f"sqlite:///{old}")
    upgrade(engine, "0001")
    with pytest.raises(StorageNotReady, match="at revision 0001, this carton-registry needs"):
        RegistryContext.open_existing(Settings(database_url=f"sqlite:///{old}"))
    upgrade(engine)
    engine.dispose()
    ctx = RegistryContext.open_existing(
        Settings(database_url=f"sqlite:///{old}", blob_store="memory://")
    )
    ctx.close()
