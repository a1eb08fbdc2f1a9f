"""inspect_carton: JSON description + problems, never fetching LINKS."""

from __future__ import annotations

import json

import numpy as np
import pytest

from registry.carton import encode_numeric, inspect_carton, write_tensor_index
from registry.carton.tensor_data import TensorIndexEntry

from .carton_testlib import (
    FIXTURE_CARTONS,
    MINIMAL_TOML,
    carton_files,
    fixture_carton,
    patch_central,
    sha,
    write_zip_bytes,
)

KEYS = {
    "manifest_sha256",
    "model_name",
    "runner",
    "inputs",
    "outputs",
    "files",
    "problems",
    "warnings",
}


@pytest.mark.parametrize("path", FIXTURE_CARTONS, ids=lambda p: p.name)
def test_fixtures_are_valid(path):
    r = inspect_carton(path)
    assert set(r) == KEYS and r["problems"] == []
    json.dumps(r)
    assert r["runner"]["runner_name"] in ("noop", "python")
    assert all("size" in f for f in r["files"] if not f.get("linked"))


def test_05_linked_files_have_no_size():
    r = inspect_carton(fixture_carton("05"))
    linked = [f for f in r["files"] if f.get("linked")]
    assert sorted(f["path"] for f in linked) == [
        "misc/_example_misc_file_0",
        "misc/diagram.png",
        "model/vocab.txt",
    ]
    assert all(set(f) == {"path", "sha256", "linked"} for f in linked)
    assert r["manifest_sha256"] == inspect_carton(fixture_carton("03"))["manifest_sha256"]


def test_02_description():
    r = inspect_carton(fixture_carton("02"))
    assert r["model_name"] == "selftest_identity"
    assert r["inputs"][0] == {
        "name": "x",
        "dtype": "float32",
        "shape": ["batch_size", 3],
        "description": "input x",
        "internal_name": None,
    }
    assert r["inputs"][2]["shape"] == "u_shape" and r["inputs"][3]["shape"] == []
    assert r["runner"]["opts"]["mode"] == "eval"


def test_not_a_zip(tmp_path):
    p = tmp_path / "x.carton"
    p.write_bytes(b"nope")
    r = inspect_carton(p)
    assert r["manifest_sha256"] is None and r["problems"] and set(r) == KEYS


def test_missing_file(tmp_path):
    r = inspect_carton(tmp_path / "absent.carton")
    assert r["manifest_sha256"] is None and "cannot read" in r["problems"][0]


def _write(tmp_path, files, method=0):
    p = tmp_path / "c.carton"
    p.write_bytes(write_zip_bytes(files, method))
    return p


def test_hash_mismatch(tmp_path):
    files = carton_files({"model/a": b"a", "tensor_data/index.toml": b"tensor = []\n"})
    files["model/a"] = b"b"  # MANIFEST still says sha256(b"a")
    r = inspect_carton(_write(tmp_path, files))
    assert len(r["problems"]) == 1 and "model/a: sha256 is" in r["problems"][0]


def test_bad_crc_is_a_problem(tmp_path):
    files = carton_files({"model/a": b"abc", "tensor_data/index.toml": b"tensor = []\n"})
    p = tmp_path / "c.carton"
    p.write_bytes(patch_central(write_zip_bytes(files), "model/a", crc=1))
    r = inspect_carton(p)
    assert any("CRC-32" in x for x in r["problems"])


def test_missing_without_links_and_missing_index(tmp_path):
    files = carton_files({"model/a": b"abc"})
    del files["model/a"]
    r = inspect_carton(_write(tmp_path, files))
    assert any("model/a: not in the zip and not listed in LINKS" in x for x in r["problems"])
    assert any("tensor_data/index.toml is missing" in x for x in r["problems"])
    assert {"path": "model/a", "sha256": sha(b"abc"), "linked": True} in r["files"]


def test_bad_config_and_references(tmp_path):
    toml = MINIMAL_TOML.replace(b"spec_version = 1", b"spec_version = 2")
    files = carton_files({"carton.toml": toml, "tensor_data/index.toml": b"tensor = []\n"})
    r = inspect_carton(_write(tmp_path, files))
    assert any("unsupported spec_version 2" in x for x in r["problems"])
    assert r["runner"] is None

    toml = (
        b'spec_version = 1\nmodel_name = "m"\n[[input]]\nname = "x"\ndtype = "int32"\n'
        b'shape = [2]\n[[output]]\nname = "y"\ndtype = "int32"\nshape = [2]\n'
        b'[[self_test]]\ninputs = { x = "@tensor_data/t0" }\n'
        b'expected_out = { y = "@tensor_data/nope" }\n'
        b'[[example]]\ninputs = { x = "@misc/in.png" }\nsample_out = { y = "@misc/gone" }\n'
        b'[runner]\nrunner_name = "r"\nrequired_framework_version = "=1"\n'
    )
    index = write_tensor_index(
        [
            TensorIndexEntry("t0", "int32", (2,), "tensor_0.bin"),
            TensorIndexEntry("t1", "int32", (3,), "tensor_1.bin"),
        ]
    )
    two = encode_numeric(np.array([1, 2], dtype=np.int32))
    files = carton_files(
        {
            "carton.toml": toml,
            "tensor_data/index.toml": index,
            "tensor_data/tensor_0.bin": two,
            "tensor_data/tensor_1.bin": two,
            "misc/in.png": b"png",
            "model/m": b"",
        }
    )
    r = inspect_carton(_write(tmp_path, files, 93))
    assert r["model_name"] == "m"
    probs = r["problems"]
    assert len(probs) == 3, probs
    assert any("@tensor_data/nope" in x for x in probs)
    assert any("@misc/gone" in x for x in probs)
    assert any("tensor_1.bin" in x and "needs 12 bytes, has 8" in x for x in probs)
