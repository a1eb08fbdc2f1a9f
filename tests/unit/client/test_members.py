"""A local carton's members read for a whole upload (``LocalCarton.pieces``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from registry.carton.zipread import CartonArchive
from registry.client import ClientError
from registry.client.chunks import READ_BYTES
from registry.client.files import CLIENT_LIMITS
from registry.client.members import LocalCarton
from tests.helpers import make_carton

WEIGHTS = os.urandom(2 * READ_BYTES + 12345)


def local(path: Path, *, stored: bool) -> LocalCarton:
    path.write_bytes(make_carton({"w.bin": WEIGHTS}, model_name="m", stored=stored))
    return LocalCarton(CartonArchive.open(path, CLIENT_LIMITS), path)


@pytest.mark.parametrize("stored", [True, False], ids=["stored", "compressed"])
def test_pieces_are_the_members_bytes(tmp_path: Path, stored: bool) -> None:
    carton = local(tmp_path / "m.carton", stored=stored)
    try:
        pieces = list(carton.pieces("w.bin"))
    finally:
        carton.archive.close()
    assert b"".join(pieces) == WEIGHTS
    assert all(isinstance(p, bytes) and 0 < len(p) <= READ_BYTES for p in pieces)


def test_a_stored_member_cut_short_on_disk_is_a_client_error(tmp_path: Path) -> None:
    path = tmp_path / "m.carton"
    carton = local(path, stored=True)
    offset, size = carton.archive.stored_span("w.bin") or (0, 0)
    try:
        with path.open("r+b") as f:  # changed after the push opened it
            f.truncate(offset + size // 2)
        with pytest.raises(ClientError, match=r"w\.bin ends early"):
            list(carton.pieces("w.bin"))
    finally:
        carton.archive.close()
