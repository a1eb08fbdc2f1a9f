"""Whole infer bodies, cross-checked against tritonclient (registry.triton.wire)."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tritonclient.http import InferResult

from registry.triton.errors import TensorCodecError
from registry.triton.wire import (
    WireTensor,
    decode_infer_body,
    encode_infer_request,
    encode_infer_response,
)

from .triton_testlib import (
    ALL_TYPES,
    SAMPLES,
    SETTINGS,
    arrays_for,
    assert_same,
    expected_decoded,
    object_array,
    triton_input,
    triton_request,
    u32,
)


def test_observed_request_body():
    inputs = [
        WireTensor("f", "FP32", (2, 3), np.array([[1, 2, 3], [4.5, -1, 0]], np.float32)),
        WireTensor("i", "INT64", (2,), np.array([1, -2])),
        WireTensor("s", "BYTES", (3,), ["ab", "", "hé"]),
        WireTensor("b", "BOOL", (4,), np.array([1, 0, 1, 1], bool)),
    ]
    body, hlen = encode_infer_request(inputs, ["out"])
    assert len(body) - hlen == 61
    assert body[hlen:].hex() == (
        "0000803f000000400000404000009040000080bf00000000"
        "0100000000000000feffffffffffffff"
        "020000006162000000000300000068c3a9"
        "01000101"
    )
    header = json.loads(body[:hlen])
    assert [t["parameters"]["binary_data_size"] for t in header["inputs"]] == [24, 16, 17, 4]
    assert all("data" not in t for t in header["inputs"])
    assert header["outputs"] == [{"name": "out", "parameters": {"binary_data": True}}]
    assert b" " not in body[:hlen]  # compact JSON

    _, no_outputs_hlen = encode_infer_request(inputs, [])
    body2, hlen2 = encode_infer_request(inputs, [])
    assert json.loads(body2[:hlen2])["parameters"] == {"binary_data_output": True}
    assert no_outputs_hlen == hlen2


# ---------------------------------------------------------------------------
# cross-check against tritonclient


@pytest.mark.parametrize("dt", ALL_TYPES)
def test_tritonclient_request_decodes(dt):
    arr = SAMPLES[dt]
    inputs = [
        triton_input("x", dt, arr),
        triton_input("pad", "INT32", np.array([5, 6], np.int32)),
        triton_input("empty", dt, arr[:0]),
    ]
    body, hlen = triton_request(inputs, ["out"])
    header, tensors = decode_infer_body(body, hlen, key="inputs")
    assert [t.name for t in tensors] == ["x", "pad", "empty"]
    assert header["outputs"] == [{"name": "out", "parameters": {"binary_data": True}}]
    assert_same(dt, tensors[0].data, arr)
    assert_same("INT32", tensors[1].data, np.array([5, 6], np.int32))
    assert tensors[2].data.shape == (0, 3)
    assert tensors[0].parameters == {}

    # and our encoder produces the very same bytes as tritonclient
    ours = encode_infer_request(
        [
            WireTensor("x", dt, arr.shape, arr),
            WireTensor("pad", "INT32", (2,), np.array([5, 6], np.int32)),
            WireTensor("empty", dt, arr[:0].shape, arr[:0]),
        ],
        ["out"],
    )
    assert ours == (body, hlen)


@pytest.mark.parametrize("dt", [t for t in ALL_TYPES if t != "BF16"])
def test_tritonclient_json_request_decodes(dt):
    arr = SAMPLES[dt]
    if dt == "BYTES":
        arr = object_array(["ab", "", "hé", "q", "x" * 300, "z"], (2, 3))
    body, hlen = triton_request([triton_input("x", dt, arr, binary=False)])
    assert hlen is None
    _, tensors = decode_infer_body(body, None, key="inputs")
    assert_same(dt, tensors[0].data, arr)
    ours, ours_hlen = encode_infer_request([WireTensor("x", dt, arr.shape, arr)], [], binary=False)
    assert ours_hlen is None
    assert json.loads(ours) == json.loads(body)


@pytest.mark.parametrize("binary", [True, False])
@pytest.mark.parametrize("dt", ALL_TYPES)
def test_tritonclient_parses_our_response(dt, binary):
    arr = SAMPLES[dt]
    if dt == "BYTES" and not binary:
        arr = object_array([b"ab", b"", "hé".encode(), b"q", b"x" * 300, b"z"], (2, 3))
    outputs = [
        WireTensor("a", dt, arr.shape, arr),
        WireTensor("b", "FP32", (1,), np.array([7.5], np.float32)),
        WireTensor("c", dt, (0, 2), arr.reshape(-1)[:0]),
    ]
    body, hlen = encode_infer_response("m", outputs, binary=binary, model_version="1")
    assert (hlen is None) == (not binary)
    result = InferResult.from_response_body(body, verbose=False, header_length=hlen)
    assert result.get_response()["model_name"] == "m"
    got = result.as_numpy("a")
    if dt == "BF16":
        assert got.dtype == ml_dtypes.bfloat16  # tritonclient's representation
        got = got.astype(np.float32)
    if dt == "BYTES" and not binary:
        # tritonclient keeps JSON strings as str
        assert got.tolist() == [[x.decode() for x in row] for row in arr.tolist()]
    else:
        assert_same(dt, got, arr)
    np.testing.assert_array_equal(result.as_numpy("b"), [7.5])
    assert result.as_numpy("c").shape == (0, 2)
    # and we read our own body back
    _, tensors = decode_infer_body(body, hlen)
    assert_same(dt, tensors[0].data, arr)


@SETTINGS
@given(dt=st.sampled_from(ALL_TYPES), data=st.data())
def test_tritonclient_request_property(dt, data):
    arr = data.draw(arrays_for(dt))
    expect = expected_decoded(dt, arr)
    tc_arr = arr if dt != "BF16" else expect
    body, hlen = triton_request([triton_input("x", dt, tc_arr)], ["y"])
    _, tensors = decode_infer_body(body, hlen, key="inputs")
    assert_same(dt, tensors[0].data, expect)
    assert encode_infer_request([WireTensor("x", dt, arr.shape, arr)], ["y"]) == (body, hlen)


# ---------------------------------------------------------------------------
# property tests


tensor_lists = st.lists(st.sampled_from(ALL_TYPES), max_size=4)


@SETTINGS
@given(dts=tensor_lists, mode=st.sampled_from(["binary", "json", "mixed"]), data=st.data())
def test_body_roundtrip(dts, mode, data):
    json_safe = mode != "binary"
    tensors = [
        WireTensor(f"t{i}", dt, arr.shape, arr, {"extra": i})
        for i, dt in enumerate(dts)
        for arr in [data.draw(arrays_for(dt, json_safe=json_safe))]
    ]
    binary = {"binary": True, "json": False, "mixed": {t.name for t in tensors[::2]}}[mode]
    req_id = data.draw(st.none() | st.text(max_size=5))
    body, hlen = encode_infer_request(tensors, ["o1", "o2"], binary=binary, request_id=req_id)
    assert (hlen is None) == (mode == "json")
    header, got = decode_infer_body(body, hlen, key="inputs")
    if req_id is not None:
        assert header["id"] == req_id
    assert [t.name for t in got] == [t.name for t in tensors]
    for want, have in zip(tensors, got, strict=True):
        assert have.datatype == want.datatype
        assert have.shape == want.shape
        assert have.parameters == {"extra": want.parameters["extra"]}
        assert_same(want.datatype, have.data, expected_decoded(want.datatype, want.data))

    body, hlen = encode_infer_response("m", tensors, binary=binary)
    _, got = decode_infer_body(body, hlen)
    for want, have in zip(tensors, got, strict=True):
        assert_same(want.datatype, have.data, expected_decoded(want.datatype, want.data))


# ---------------------------------------------------------------------------
# malformed bodies


def test_error_message_names_tensor_and_sizes():
    good, hlen = encode_infer_request(
        [WireTensor("in0", "FP32", (2,), np.zeros(2, np.float32))], []
    )
    header = json.loads(good[:hlen])
    header["inputs"][0]["shape"] = [3]
    head = json.dumps(header).encode()
    with pytest.raises(TensorCodecError, match=r"'in0'.*12 bytes.*got 8"):
        decode_infer_body(head + good[hlen:], len(head), key="inputs")


def _body(tensors, binary_section: bytes, key="inputs") -> tuple[bytes, int]:
    head = json.dumps({key: tensors}).encode()
    return head + binary_section, len(head)


def _bin(name, dt, shape, size):
    return {"name": name, "datatype": dt, "shape": shape, "parameters": {"binary_data_size": size}}


@pytest.mark.parametrize(
    ("tensors", "section", "match"),
    [
        ([_bin("a", "FP32", [2], 8)], b"\x00" * 7, "add up to 8 bytes"),
        ([_bin("a", "FP32", [2], 8)], b"\x00" * 9, "add up to 8 bytes"),
        ([_bin("a", "FP32", [2], 4), _bin("b", "FP32", [1], 4)], b"\x00" * 8, "'a'"),
        ([_bin("a", "FP32", [1], 4)], b"", "add up to 4"),
        ([], b"\x00", "add up to 0"),
        ([_bin("a", "FP99", [1], 4)], b"\x00" * 4, "unknown datatype"),
        ([_bin("a", "FP32", [-1], 4)], b"\x00" * 4, "negative"),
        ([_bin("a", "FP32", [1], -4)], b"", "binary_data_size"),
        ([_bin("a", "FP32", [1], True)], b"\x00", "binary_data_size"),
        ([_bin("a", "BYTES", [2], 9)], u32(1) + b"a" + u32(9), "claims 9"),
        ([{"name": "a", "datatype": "FP32", "shape": [3], "data": [1, 2]}], b"", "needs 3"),
        ([{"name": "a", "datatype": "INT8", "shape": [1], "data": [300]}], b"", "INT8"),
        ([{"name": "a", "datatype": "INT8", "shape": [1], "data": [1.5]}], b"", "INT8"),
        ([{"name": "a", "datatype": "BOOL", "shape": [1], "data": ["x"]}], b"", "BOOL"),
        ([{"name": "a", "datatype": "BYTES", "shape": [1], "data": [1]}], b"", "string"),
        ([{"name": "a", "datatype": "FP32", "shape": [1]}], b"", "no data"),
        ([{"name": "a", "datatype": "FP32", "data": [1]}], b"", "missing shape"),
        ([{"datatype": "FP32", "shape": [1], "data": [1]}], b"", "name"),
        (
            [{"name": "a", "datatype": "FP32", "shape": [1], "data": [1],
              "parameters": {"binary_data_size": 4}}],
            b"\x00" * 4,
            "both",
        ),
    ],
)  # fmt: skip
def test_decode_body_rejects(tensors, section, match):
    body, hlen = _body(tensors, section)
    with pytest.raises(TensorCodecError, match=match):
        decode_infer_body(body, hlen, key="inputs")


def test_decode_body_header_length_errors():
    body, hlen = encode_infer_request([WireTensor("a", "INT32", (1,), [1])], [])
    with pytest.raises(TensorCodecError, match="outside body"):
        decode_infer_body(body, len(body) + 1, key="inputs")
    with pytest.raises(TensorCodecError, match="outside body"):
        decode_infer_body(body, -1, key="inputs")
    with pytest.raises(TensorCodecError, match="decode_raw_binary"):
        decode_infer_body(body, 0, key="inputs")
    with pytest.raises(TensorCodecError, match="not valid JSON"):
        decode_infer_body(body, hlen - 1, key="inputs")
    with pytest.raises(TensorCodecError, match="not valid JSON"):
        decode_infer_body(body, None, key="inputs")  # binary tail is not JSON
    with pytest.raises(TensorCodecError, match="not valid JSON"):
        decode_infer_body(b"\xff\xfe", None)
    with pytest.raises(TensorCodecError, match="JSON object"):
        decode_infer_body(b"[]", None)
    with pytest.raises(TensorCodecError, match=r"add up to 4 bytes.* is 3 bytes"):
        decode_infer_body(body[:-1], hlen, key="inputs")  # binary section cut off


def test_json_body_forms():
    body = json.dumps(
        {
            "inputs": [
                {"name": "n", "datatype": "INT32", "shape": [2, 2], "data": [[1, 2], [3, 4]]},
                {"name": "f", "datatype": "FP32", "shape": [2, 2], "data": [1, 2, 3, 4]},
                {"name": "s", "datatype": "BYTES", "shape": [], "data": ["hé"]},
                {"name": "b", "datatype": "BOOL", "shape": [1], "data": [True]},
                {"name": "h", "datatype": "BF16", "shape": [1], "data": [1.00390625]},
            ]
        }
    ).encode()
    _, ts = decode_infer_body(body, None, key="inputs")
    np.testing.assert_array_equal(ts[0].data, [[1, 2], [3, 4]])
    np.testing.assert_array_equal(ts[1].data, [[1, 2], [3, 4]])
    assert ts[2].data.shape == () and ts[2].data.item() == "hé".encode()
    assert ts[3].data.dtype == bool
    assert ts[4].data.dtype == np.float32 and ts[4].data[0] == 1.0  # rounded to bf16
