"""Triton/KServe v2 binary tensor data codec (registry.carton.binary_tensor)."""

from __future__ import annotations

import json
import struct

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from tritonclient.http import InferInput, InferRequestedOutput, InferResult
from tritonclient.http._utils import _get_inference_request

from registry.carton.binary_tensor import (
    CARTON_TO_TRITON,
    TRITON_DTYPES,
    TensorCodecError,
    WireTensor,
    decode_infer_body,
    decode_raw_binary,
    decode_tensor,
    encode_infer_request,
    encode_infer_response,
    encode_tensor,
    json_tensor_data,
    tensor_from_json,
    triton_to_carton_dtype,
)

ALL_TYPES = sorted(TRITON_DTYPES)
FLOAT_TYPES = {"FP16", "FP32", "FP64", "BF16"}
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------
# helpers


def bf16_round(x) -> np.ndarray:
    """What a BF16 value looks like after the wire, per ml_dtypes (tritonclient's type)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def expected_decoded(dt: str, arr: np.ndarray) -> np.ndarray:
    if dt == "BF16":
        return bf16_round(arr)
    return arr


def assert_same(dt: str, got: np.ndarray, want: np.ndarray) -> None:
    """Equal shapes and values; floats compared bitwise (NaN payloads, -0.0)."""
    want = np.asarray(want) if dt != "BYTES" else want
    assert got.shape == want.shape
    if dt == "BYTES":
        assert got.dtype == object
        assert [bytes(x) if isinstance(x, bytes) else x for x in got.reshape(-1)] == [
            x.encode() if isinstance(x, str) else bytes(x) for x in want.reshape(-1)
        ]
        return
    if dt == "BF16":
        assert got.dtype == np.float32
    else:
        assert got.dtype == TRITON_DTYPES[dt]
    if got.dtype.kind == "f":
        u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
        want = np.ascontiguousarray(want, dtype=got.dtype)
        np.testing.assert_array_equal(np.ascontiguousarray(got).view(u), want.view(u))
    else:
        np.testing.assert_array_equal(got, want)


def object_array(values, shape=None) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        arr[i] = v
    return arr.reshape(shape if shape is not None else (len(values),))


shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


def arrays_for(dt: str, *, json_safe: bool = False):
    if dt == "BYTES":
        elements = st.text(max_size=5).map(str.encode) if json_safe else st.binary(max_size=6)
        return hnp.arrays(object, shapes, elements=elements)
    if dt == "BF16":
        if json_safe:
            # keep clear of float32 max, which rounds to inf in bfloat16
            elems = st.floats(-(2.0**127), 2.0**127, width=32, allow_nan=False)
            return hnp.arrays(np.float32, shapes, elements=elems)
        return hnp.arrays(np.float32, shapes)
    dtype = TRITON_DTYPES[dt]
    if json_safe and dt in FLOAT_TYPES:
        elems = st.floats(width=dtype.itemsize * 8, allow_nan=False, allow_infinity=False)
        return hnp.arrays(dtype, shapes, elements=elems)
    return hnp.arrays(dtype, shapes)


SAMPLES = {
    "BOOL": np.array([[True, False, True], [False, False, True]]),
    "UINT8": np.array([[0, 1, 255], [7, 8, 9]], dtype=np.uint8),
    "UINT16": np.array([[0, 1, 65535], [7, 8, 9]], dtype=np.uint16),
    "UINT32": np.array([[0, 1, 2**32 - 1], [7, 8, 9]], dtype=np.uint32),
    "UINT64": np.array([[0, 1, 2**64 - 1], [7, 8, 9]], dtype=np.uint64),
    "INT8": np.array([[-128, 1, 127], [7, -8, 9]], dtype=np.int8),
    "INT16": np.array([[-32768, 1, 32767], [7, -8, 9]], dtype=np.int16),
    "INT32": np.array([[-(2**31), 1, 2**31 - 1], [7, -8, 9]], dtype=np.int32),
    "INT64": np.array([[-(2**63), 1, 2**63 - 1], [7, -8, 9]], dtype=np.int64),
    "FP16": np.array([[1, -2.5, 65504], [0.1, -0.0, 6e-8]], dtype=np.float16),
    "FP32": np.array([[1, -2.5, 3.4e38], [0.1, -0.0, 1e-45]], dtype=np.float32),
    "FP64": np.array([[1, -2.5, 1.7e308], [0.1, -0.0, 5e-324]], dtype=np.float64),
    # exactly representable in bfloat16
    "BF16": np.array([[1, -2.5, 3.0e38], [0.15625, -0.0, 1e-38]], dtype=np.float32)
    .astype(ml_dtypes.bfloat16)
    .astype(np.float32),
    "BYTES": object_array([b"ab", b"", "hé".encode(), b"\x00\xff", b"x" * 300, b"z"], (2, 3)),
}


def triton_input(name: str, dt: str, arr: np.ndarray, binary: bool = True) -> InferInput:
    inp = InferInput(name, list(arr.shape), dt)
    if dt == "BF16":
        arr = arr.astype(ml_dtypes.bfloat16)
    inp.set_data_from_numpy(arr, binary_data=binary)
    return inp


def triton_request(inputs, outputs=()):
    return _get_inference_request(
        inputs=inputs,
        request_id="",
        outputs=[InferRequestedOutput(o, binary_data=True) for o in outputs],
        sequence_id=0,
        sequence_start=False,
        sequence_end=False,
        priority=0,
        timeout=None,
        custom_parameters=None,
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


def test_dtype_mapping():
    assert CARTON_TO_TRITON == {
        "float32": "FP32",
        "float64": "FP64",
        "int8": "INT8",
        "int16": "INT16",
        "int32": "INT32",
        "int64": "INT64",
        "uint8": "UINT8",
        "uint16": "UINT16",
        "uint32": "UINT32",
        "uint64": "UINT64",
        "string": "BYTES",
    }
    for carton, triton in CARTON_TO_TRITON.items():
        assert triton_to_carton_dtype(triton) == carton
    for dt in ("BOOL", "FP16", "BF16"):
        assert triton_to_carton_dtype(dt) is None
    with pytest.raises(TensorCodecError):
        triton_to_carton_dtype("TYPE_FP32")
    assert TRITON_DTYPES["BYTES"] is None
    assert TRITON_DTYPES["BF16"] == np.float32
    assert set(TRITON_DTYPES) == {
        "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
        "FP16", "FP32", "FP64", "BYTES", "BF16",
    }  # fmt: skip


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
# malformed data


def _u32(n: int) -> bytes:
    return struct.pack("<I", n)


@pytest.mark.parametrize(
    ("dt", "shape", "raw", "match"),
    [
        ("FP32", [2], b"\x00" * 7, "needs 8 bytes"),
        ("FP32", [2], b"\x00" * 9, "needs 8 bytes"),
        ("INT64", [0], b"\x00", "needs 0 bytes"),
        ("BF16", [3], b"\x00" * 4, "needs 6 bytes"),
        ("BOOL", [2], b"\x01\x02", "0/1"),
        ("BYTES", [1], _u32(5) + b"abc", "claims 5 bytes"),
        ("BYTES", [2], _u32(1) + b"a" + b"\x01\x00", "prefix truncated"),
        ("BYTES", [2], _u32(1) + b"a", "has 1 element"),
        ("BYTES", [1], _u32(1) + b"a" + _u32(0), "trailing"),
        ("BYTES", [0], _u32(0), "trailing"),
        ("FP32", [-1], b"", "negative"),
        ("FP32", [2, -2], b"", "negative"),
        ("FP32", [1.5], b"", "non-integer"),
        ("FP33", [1], b"", "unknown datatype"),
    ],
)
def test_decode_tensor_rejects(dt, shape, raw, match):
    with pytest.raises(TensorCodecError, match=match):
        decode_tensor(dt, shape, raw)


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
        ([_bin("a", "BYTES", [2], 9)], _u32(1) + b"a" + _u32(9), "claims 9"),
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
