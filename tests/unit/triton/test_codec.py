"""Single tensors on the wire and in JSON (registry.triton.codec, registry.triton.json_tensors)."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from registry.triton.codec import decode_raw_binary, decode_tensor, encode_tensor
from registry.triton.datatypes import TRITON_DTYPES
from registry.triton.errors import TensorCodecError
from registry.triton.json_tensors import json_tensor_data, tensor_from_json
from registry.triton.wire import WireTensor, decode_infer_body, encode_infer_request

from .triton_testlib import (
    ALL_TYPES,
    SETTINGS,
    arrays_for,
    assert_same,
    expected_decoded,
    u32,
)

# ---------------------------------------------------------------------------
# exact bytes (clients-observed.md)


@pytest.mark.parametrize(
    ("dt", "data", "hexbytes"),
    [
        ("FP32", [1, 2, 3, 4.5, -1, 0], "0000803f 00000040 00004040 00009040 000080bf 00000000"),
        ("INT64", [1, -2], "0100000000000000 feffffffffffffff"),
        ("BYTES", ["ab", "", "hé"], "02000000 6162 00000000 03000000 68c3a9"),
        ("BOOL", [1, 0, 1, 1], "01 00 01 01"),
        ("BOOL", [True, False, True, True], "01 00 01 01"),
        ("FP16", [1, -2.5], "003c 00c1"),
        ("BF16", [1, -2.5], "803f 20c0"),
    ],
)
def test_observed_bytes(dt, data, hexbytes):
    raw = bytes.fromhex(hexbytes.replace(" ", ""))
    assert encode_tensor(dt, data) == raw
    assert encode_tensor(dt, np.asarray(data, dtype=object if dt == "BYTES" else None)) == raw
    got = decode_tensor(dt, [len(data)], raw)
    if dt == "BYTES":
        assert got.tolist() == [s.encode() for s in data]
    else:
        np.testing.assert_array_equal(got, np.asarray(data, dtype=TRITON_DTYPES[dt]))


def test_bf16_encoding_matches_ml_dtypes_rounding():
    x = np.array([1.00390625, 1.01171875, 3.4e38, -1e-40, np.inf, -np.inf], np.float32)
    nan = np.array([0x7FA12345, 0xFFC00001, 0x7F800001], np.uint32).view(np.float32)
    x = np.concatenate([x, nan])
    with np.errstate(invalid="ignore"):
        want = x.astype(ml_dtypes.bfloat16).tobytes()
    assert encode_tensor("BF16", x) == want
    # an ml_dtypes.bfloat16 array is sent bit-exact
    b = np.array([1, -2.5], ml_dtypes.bfloat16)
    assert encode_tensor("BF16", b) == bytes.fromhex("803f20c0")


# ---------------------------------------------------------------------------
# property tests


@SETTINGS
@given(dt=st.sampled_from(ALL_TYPES), data=st.data())
def test_tensor_roundtrip(dt, data):
    arr = data.draw(arrays_for(dt))
    raw = encode_tensor(dt, arr)
    got = decode_tensor(dt, arr.shape, raw)
    assert_same(dt, got, expected_decoded(dt, arr))
    if dt != "BYTES":
        assert len(raw) == arr.size * (2 if dt == "BF16" else TRITON_DTYPES[dt].itemsize)
        # decoded data is writable and in native order
        assert got.flags.writeable
    # BF16 decode -> encode is the identity on the wire
    assert encode_tensor(dt, got) == raw


@SETTINGS
@given(dt=st.sampled_from(ALL_TYPES), data=st.data())
def test_json_roundtrip(dt, data):
    arr = data.draw(arrays_for(dt, json_safe=True))
    flat = json_tensor_data(dt, arr)
    assert len(flat) == arr.size
    flat = json.loads(json.dumps(flat))
    assert_same(dt, tensor_from_json(dt, arr.shape, flat), expected_decoded(dt, arr))
    if dt != "BYTES" and arr.ndim:
        nested = json.loads(json.dumps(expected_decoded(dt, arr).tolist()))
        assert_same(dt, tensor_from_json(dt, arr.shape, nested), expected_decoded(dt, arr))


# ---------------------------------------------------------------------------
# malformed data


@pytest.mark.parametrize(
    ("dt", "shape", "raw", "match"),
    [
        ("FP32", [2], b"\x00" * 7, "needs 8 bytes"),
        ("FP32", [2], b"\x00" * 9, "needs 8 bytes"),
        ("INT64", [0], b"\x00", "needs 0 bytes"),
        ("BF16", [3], b"\x00" * 4, "needs 6 bytes"),
        ("BOOL", [2], b"\x01\x02", "0/1"),
        ("BYTES", [1], u32(5) + b"abc", "claims 5 bytes"),
        ("BYTES", [2], u32(1) + b"a" + b"\x01\x00", "prefix truncated"),
        ("BYTES", [2], u32(1) + b"a", "has 1 element"),
        ("BYTES", [1], u32(1) + b"a" + u32(0), "trailing"),
        ("BYTES", [0], u32(0), "trailing"),
        ("FP32", [-1], b"", "negative"),
        ("FP32", [2, -2], b"", "negative"),
        ("FP32", [1.5], b"", "non-integer"),
        ("FP33", [1], b"", "unknown datatype"),
    ],
)
def test_decode_tensor_rejects(dt, shape, raw, match):
    with pytest.raises(TensorCodecError, match=match):
        decode_tensor(dt, shape, raw)


def test_json_encoding_refusals():
    with pytest.raises(TensorCodecError, match="not UTF-8"):
        json_tensor_data("BYTES", [b"\xff"])
    with pytest.raises(TensorCodecError, match="binary"):
        encode_infer_request([WireTensor("a", "FP32", (1,), [np.nan])], [], binary=False)
    # NaN is fine in binary form
    body, hlen = encode_infer_request([WireTensor("a", "FP32", (1,), [np.nan])], [])
    assert np.isnan(decode_infer_body(body, hlen, key="inputs")[1][0].data[0])
    assert json_tensor_data("BOOL", np.array([1, 0], np.uint8)) == [True, False]
    assert json_tensor_data("FP16", np.array([1.5], np.float16)) == [1.5]
    assert json_tensor_data("BF16", [1.00390625]) == [1.0]


def test_encode_rejects():
    with pytest.raises(TensorCodecError, match="shape"):
        encode_infer_request([WireTensor("a", "FP32", (3,), [1.0, 2.0])], [])
    with pytest.raises(TensorCodecError, match="negative"):
        encode_infer_request([WireTensor("a", "FP32", (-1,), [])], [])
    with pytest.raises(TensorCodecError, match="out of range"):
        encode_tensor("UINT8", np.array([256]))
    with pytest.raises(TensorCodecError, match="out of range"):
        encode_tensor("UINT64", np.array([-1]))
    with pytest.raises(TensorCodecError):
        encode_tensor("INT8", [300])
    with pytest.raises(TensorCodecError, match="float64"):
        encode_tensor("INT32", [1.5])
    with pytest.raises(TensorCodecError, match="0/1"):
        encode_tensor("BOOL", [2])
    with pytest.raises(TensorCodecError, match="str or bytes"):
        encode_tensor("BYTES", [1])
    with pytest.raises(TensorCodecError, match="string"):
        encode_tensor("FP32", ["1"])
    with pytest.raises(TensorCodecError, match="unknown datatype"):
        encode_tensor("fp32", [1])
    with pytest.raises(TensorCodecError):
        tensor_from_json("INT32", [2], [[1], [2, 3]])  # 3 elements
    assert isinstance(TensorCodecError("x"), ValueError)


def test_raw_binary():
    raw = encode_tensor("FP32", np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(
        decode_raw_binary(raw, "FP32", [-1, 3]), np.arange(6).reshape(2, 3)
    )
    np.testing.assert_array_equal(decode_raw_binary(raw, "FP32", [6]), np.arange(6))
    assert decode_raw_binary(b"", "FP32", [-1, 0]).shape == (0, 0)
    assert decode_raw_binary(b"", "INT8", [-1]).shape == (0,)
    s = decode_raw_binary(encode_tensor("BYTES", ["ab"]), "BYTES", [1])
    assert s.tolist() == [b"ab"]
    assert decode_raw_binary(encode_tensor("BYTES", ["a", "b"]), "BYTES", [-1]).shape == (2,)
    with pytest.raises(TensorCodecError, match="multiple of 4"):
        decode_raw_binary(raw[:-1], "FP32", [-1])
    with pytest.raises(TensorCodecError, match="not divisible"):
        decode_raw_binary(raw[:-4], "FP32", [-1, 3])
    with pytest.raises(TensorCodecError, match="needs 24 bytes"):
        decode_raw_binary(raw + b"\x00" * 4, "FP32", [2, 3])
    with pytest.raises(TensorCodecError, match="more than one"):
        decode_raw_binary(raw, "FP32", [-1, -1])
    with pytest.raises(TensorCodecError, match="negative"):
        decode_raw_binary(raw, "FP32", [-2, 3])
    with pytest.raises(TensorCodecError, match="holds none"):
        decode_raw_binary(raw, "FP32", [-1, 0])
