"""Tensor tables from weights headers: safetensors (written by the ``safetensors`` package)
and ``.npy`` (written by numpy), read in two steps as the registry reads them."""

from __future__ import annotations

import io
import json
import struct

import numpy as np
import pytest
from safetensors.numpy import save

from registry.carton.weights import (
    HEAD_BYTES,
    HeaderNeed,
    WeightsHeaderError,
    parse_header,
    weights_kind,
)


def read_like_the_registry(kind: str, data: bytes, name: str = "") -> list:
    head = data[:HEAD_BYTES]
    parsed = parse_header(kind, head, len(data), name)
    if isinstance(parsed, HeaderNeed):
        head = data[: parsed.needed]
        parsed = parse_header(kind, head, len(data), name)
    assert not isinstance(parsed, HeaderNeed)
    return parsed


def test_safetensors_table_matches_the_data():
    arrays = {
        "b.weight": np.arange(12, dtype=np.float32).reshape(3, 4),
        "a.bias": np.arange(5, dtype=np.int64),
        "scalar": np.array(7, dtype=np.float16),
    }
    data = save(arrays, metadata={"format": "np"})
    table = {t.name: t for t in read_like_the_registry("safetensors", data)}
    assert set(table) == set(arrays)
    dtypes = {"b.weight": "F32", "a.bias": "I64", "scalar": "F16"}
    for name, array in arrays.items():
        t = table[name]
        assert (t.dtype, t.shape) == (dtypes[name], array.shape)
        assert data[t.start : t.end] == array.tobytes()


def test_npy_table_matches_the_data():
    array = np.arange(24, dtype="<f8").reshape(2, 3, 4)
    out = io.BytesIO()
    np.save(out, array)
    data = out.getvalue()
    (t,) = read_like_the_registry("npy", data, "x.npy")
    assert (t.name, t.dtype, t.shape) == ("x.npy", "<f8", (2, 3, 4))
    assert data[t.start : t.end] == array.tobytes()


def test_kinds_by_name():
    assert weights_kind("model/model.SafeTensors") == "safetensors"
    assert weights_kind("a/b.npy") == "npy"
    assert weights_kind("model.bin") is None


def _safetensors(header: object, data: bytes = b"") -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


@pytest.mark.parametrize(
    "data",
    [
        b"\x01\x02",  # shorter than the length field
        struct.pack("<Q", 10**12) + b"{}",  # a length past the file
        _safetensors(["not", "an", "object"]),
        _safetensors({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"0000"),
        _safetensors({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 8]}}, b"0000"),
        _safetensors({"t": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}, b"0000"),
        _safetensors({"t": "F32"}),
        struct.pack("<Q", 4) + b"{{{{",
    ],
)
def test_malformed_safetensors_headers_are_errors(data):
    with pytest.raises(WeightsHeaderError):
        read_like_the_registry("safetensors", data)


@pytest.mark.parametrize(
    "data",
    [
        b"NOTNUMPY" + b"\0" * 20,
        b"\x93NUMPY\x09\x00" + b"\0" * 20,  # an unknown version
        b"\x93NUMPY\x01\x00\x08\x00__import" + b"\0" * 10,
        b"\x93NUMPY\x01\x00\x0a\x00{'a': 1}  " + b"\0" * 10,  # no descr or shape
        b"\x93NUMPY\x01\x00\xff\xff{}",  # a header past the file
    ],
)
def test_malformed_npy_headers_are_errors(data):
    with pytest.raises(WeightsHeaderError):
        read_like_the_registry("npy", data, "x.npy")
