"""Helpers for the Triton codec tests: tensor strategies, samples, bitwise comparison.

``triton_input``/``triton_request`` build bodies with tritonclient itself, the
reference the codec is checked against.
"""

from __future__ import annotations

import struct

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from tritonclient.http import InferInput, InferRequestedOutput
from tritonclient.http._utils import _get_inference_request

from registry.triton.datatypes import TRITON_DTYPES

ALL_TYPES = sorted(TRITON_DTYPES)
FLOAT_TYPES = {"FP16", "FP32", "FP64", "BF16"}
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


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


def u32(n: int) -> bytes:
    """A BYTES element's length prefix."""
    return struct.pack("<I", n)
