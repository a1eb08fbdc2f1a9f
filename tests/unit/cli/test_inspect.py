"""inspect FILE: JSON description and validation of local cartons (no server)."""

from __future__ import annotations

import io
import json

import pytest
from backports.zstd import zipfile

from registry.carton.zipread import CartonArchive
from tests.conftest import FIXTURE_CARTONS, fixture_carton

KEYS = {"manifest_sha256", "model_name", "runner", "inputs", "outputs", "files", "problems"}


@pytest.mark.parametrize("carton", FIXTURE_CARTONS, ids=lambda p: p.name)
def test_inspect_every_fixture(cli, carton):
    run = cli("inspect", str(carton))
    assert run.code == 0, run.out
    data = json.loads(run.out)
    assert set(data) >= KEYS
    assert data["problems"] == []
    with CartonArchive.open(carton) as archive:
        assert data["manifest_sha256"] == archive.manifest_sha256
    assert data["runner"]["runner_name"]
    for f in data["files"]:
        assert {"path", "sha256"} <= set(f)


def test_inspect_linked_files(cli):
    data = json.loads(cli("inspect", str(fixture_carton("05"))).out)
    linked = [f for f in data["files"] if f.get("linked")]
    with CartonArchive.open(fixture_carton("05")) as archive:
        assert {f["path"] for f in linked} == set(archive.missing_paths())
    assert {"model/vocab.txt", "misc/diagram.png"} <= {f["path"] for f in linked}
    assert all("size" not in f for f in linked)
    assert all("size" in f for f in data["files"] if not f.get("linked"))


def test_inspect_tampered_carton(cli, tmp_path):
    src = fixture_carton("02")
    out = io.BytesIO()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
        target = next(n for n in zin.namelist() if n.startswith("model/") and not n.endswith("/"))
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == target:
                data = data + b"tampered"
            zout.writestr(info.filename, data)
    bad = tmp_path / "bad.carton"
    bad.write_bytes(out.getvalue())
    run = cli("inspect", str(bad))
    assert run.code == 1
    data = json.loads(run.out)
    assert any(target in p for p in data["problems"])


def test_inspect_not_a_zip(cli, tmp_path):
    bad = tmp_path / "x.carton"
    bad.write_bytes(b"hello")
    run = cli("inspect", str(bad))
    assert run.code == 1
    assert json.loads(run.out)["problems"]


def test_inspect_missing_file(cli, tmp_path):
    run = cli("inspect", str(tmp_path / "nope.carton"))
    assert run.code == 1
    assert "no such file" in run.err
