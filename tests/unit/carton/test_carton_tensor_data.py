"""tensor_data: index.toml and tensor files, byte-exact with the reference packer."""

from __future__ import annotations

import numpy as np
import pytest

from registry.carton import (
    CartonArchive,
    CartonFormatError,
    TensorIndexEntry,
    decode_numeric,
    decode_string_tensor,
    encode_numeric,
    encode_string_tensor,
    load_tensor,
    parse_tensor_index,
    write_tensor_index,
)

from .carton_testlib import FIXTURE_CARTONS, fixture_carton


@pytest.mark.parametrize("path", FIXTURE_CARTONS, ids=lambda p: p.name)
def test_fixture_tensors_round_trip(path):
    with CartonArchive.open(path) as a:
        raw = a.read_bytes("tensor_data/index.toml", 1 << 20)
        entries = parse_tensor_index(raw)
        assert write_tensor_index(entries) == raw
        for e in entries:
            if e.path not in a.members:
                continue
            value = load_tensor(e, lambda p: a.read_bytes(p, 1 << 20))
            original = a.read_bytes(e.path, 1 << 20)
            if e.dtype == "string":
                assert encode_string_tensor(value) == original
            else:
                assert encode_numeric(value) == original
            assert value.shape == e.shape


def test_fixture_01_empty_index():
    with CartonArchive.open(fixture_carton("01")) as a:
        assert a.read_bytes("tensor_data/index.toml", 100) == b"tensor = []\n"
    assert parse_tensor_index(b"tensor = []\n") == []
    assert write_tensor_index([]) == b"tensor = []\n"


def test_fixture_02_values():
    with CartonArchive.open(fixture_carton("02")) as a:
        raw = a.read_bytes("tensor_data/index.toml", 1 << 20)
        index = {e.name: e for e in parse_tensor_index(raw)}
        s = load_tensor(index["_tensor_2"], lambda p: a.read_bytes(p, 100))
        assert s.shape == () and s.dtype == np.float64
        u = load_tensor(index["_tensor_3"], lambda p: a.read_bytes(p, 100))
        assert u.dtype == np.uint8 and u.shape == (1,)


def test_fixture_03_strings():
    with CartonArchive.open(fixture_carton("03")) as a:
        raw = a.read_bytes("tensor_data/index.toml", 1 << 20)
        index = {e.name: e for e in parse_tensor_index(raw)}
        t = load_tensor(index["_tensor_0"], lambda p: a.read_bytes(p, 1 << 20))
    assert t.tolist() == [["hello", "world"], ["日本語", 'quote " and \\ backslash']]


def test_numeric_round_trip_all_dtypes():
    for dtype in (
        "float32",
        "float64",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
    ):
        arr = (np.arange(24) % 7).astype(dtype).reshape(2, 3, 4)
        raw = encode_numeric(arr)
        assert len(raw) == arr.nbytes
        assert np.array_equal(decode_numeric(raw, dtype, (2, 3, 4)), arr)
    big_endian = np.array([1, 2], dtype=">i4")
    assert encode_numeric(big_endian) == b"\x01\0\0\0\x02\0\0\0"
    assert (
        encode_numeric(np.arange(6, dtype="<i2").reshape(2, 3).T)
        == np.arange(6, dtype="<i2").reshape(2, 3).T.copy().tobytes()
    )


def test_numeric_size_checked():
    with pytest.raises(CartonFormatError, match="needs 24 bytes"):
        decode_numeric(b"\0" * 20, "float32", (2, 3))
    with pytest.raises(CartonFormatError, match="not a numeric"):
        decode_numeric(b"", "string", (0,))
    with pytest.raises(CartonFormatError):
        encode_numeric(np.array([True]))


def test_string_tensor_round_trip_and_count():
    vals = ["a", "it's", "'''", "x'", "tab\there", "line\nbreak", 'q"', "\\", "", "日本"]
    raw = encode_string_tensor(vals)
    assert decode_string_tensor(raw, (10,)).tolist() == vals
    assert decode_string_tensor(raw, (2, 5)).shape == (2, 5)
    with pytest.raises(CartonFormatError, match="needs 3 strings"):
        decode_string_tensor(raw, (3,))
    assert encode_string_tensor(["x"]) == b"data = ['x']\n"
    assert encode_string_tensor(np.array([["a", "b"]], dtype=object)) == (
        b"data = [\n    'a',\n    'b',\n]\n"
    )


def test_nested_tensor():
    entries = [
        TensorIndexEntry("n", "nested", None, None, ("i0", "i1")),
        TensorIndexEntry("i0", "int32", (2,), "tensor_0.bin"),
        TensorIndexEntry("i1", "string", (1,), "tensor_1.toml"),
    ]
    raw = write_tensor_index(entries)
    assert parse_tensor_index(raw) == entries
    files = {
        "tensor_data/tensor_0.bin": encode_numeric(np.array([1, 2], dtype=np.int32)),
        "tensor_data/tensor_1.toml": encode_string_tensor(["z"]),
    }
    out = load_tensor(entries[0], files.__getitem__, {e.name: e for e in entries})
    assert out[0].tolist() == [1, 2] and out[1].tolist() == ["z"]
    with pytest.raises(CartonFormatError, match="needs the tensor index"):
        load_tensor(entries[0], files.__getitem__)


@pytest.mark.parametrize(
    "raw,why",
    [
        (b"", "'tensor' must be an array"),
        (b"[[tensor]]\nname = 'a'\ndtype = 'float32'\nshape = [1]\nfile = 'a.bin'\n", "inner"),
        (
            b"[[tensor]]\nname = 'a'\ndtype = 'bool'\nshape = [1]\nfile = 'a.bin'\ninner = []\n",
            "unknown dtype",
        ),
        (
            b"[[tensor]]\nname = 'a'\ndtype = 'int8'\nshape = [-1]\nfile = 'a.bin'\ninner = []\n",
            "shape",
        ),
        (b"[[tensor]]\nname = 'a'\ndtype = 'int8'\nshape = [1]\ninner = []\n", "file is required"),
        (
            b"[[tensor]]\nname = 'a'\ndtype = 'int8'\nshape = [1]\nfile = '../x'\ninner = []\n",
            "bad file",
        ),
        (
            b"[[tensor]]\nname = 'a'\ndtype = 'int8'\nshape = [1]\nfile = 'a'\ninner = []\n"
            b"[[tensor]]\nname = 'a'\ndtype = 'int8'\nshape = [1]\nfile = 'b'\ninner = []\n",
            "duplicate",
        ),
        (b"[[tensor]]\nname = 'n'\ndtype = 'nested'\ninner = ['zz']\n", "not listed"),
    ],
)
def test_bad_index(raw, why):
    with pytest.raises(CartonFormatError, match=why):
        parse_tensor_index(raw)
