"""The binary tensor data extension: one tensor's bytes on the wire, and back.

See ``/work/shared/spec/triton-binary-tensor-data.md``.  Wire rules:

* fixed-size types are little-endian, row-major, no padding; BOOL is one byte 0/1;
* BYTES elements are a 4-byte little-endian unsigned length followed by the bytes;
* BF16 is the upper 16 bits of an IEEE float32.  Encoding from float data rounds
  to nearest even (NaN becomes the canonical quiet NaN, sign kept), which is what
  tritonclient >= 2.5x sends (it serialises ``ml_dtypes.bfloat16`` arrays, and
  ``numpy -> bfloat16`` conversion rounds).  Arrays whose dtype is
  ``ml_dtypes.bfloat16`` are sent bit-exact.  Decoding yields float32 arrays.

The coercion helpers (caller data -> flat arrays) are shared with ``json_tensors``.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from registry.triton.datatypes import (
    INT_TYPES,
    TRITON_DTYPES,
    TRITON_ELEMENT_SIZE,
    WIRE_DTYPES,
    check_datatype,
    check_shape,
    tensor_label,
)
from registry.triton.errors import TensorCodecError

_U32 = struct.Struct("<I")


# ---------------------------------------------------------------------------
# BF16


def _bf16_bits(values: np.ndarray) -> np.ndarray:
    """float data -> uint16 bfloat16 bit patterns, round to nearest even."""
    with np.errstate(over="ignore", invalid="ignore"):
        f = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(f)
    if nan.any():
        rounded[nan] = ((bits[nan] >> 16) & 0x8000) | 0x7FC0
    return rounded.astype(np.uint16)


def bf16_to_float32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


# ---------------------------------------------------------------------------
# coercion of caller data


def flatten_nested(data: Any) -> list[Any]:
    """Flatten (possibly nested) lists/tuples row-major; a bare scalar is one element."""
    if isinstance(data, np.ndarray):
        return list(data.reshape(-1))
    if not isinstance(data, (list, tuple)):
        return [data]
    out: list[Any] = []
    stack = [iter(data)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, (list, tuple)):
                stack.append(iter(item))
                break
            if isinstance(item, np.ndarray):
                out.extend(item.reshape(-1))
            else:
                out.append(item)
        else:
            stack.pop()
    return out


def flat_bytes(data: Any, name: str | None = None) -> list[bytes]:
    """BYTES elements as ``bytes`` (str is UTF-8 encoded), row-major."""
    out: list[bytes] = []
    for e in flatten_nested(data):
        if isinstance(e, bytes):  # includes np.bytes_
            out.append(bytes(e))
        elif isinstance(e, str):  # includes np.str_
            out.append(e.encode("utf-8"))
        elif isinstance(e, (bytearray, memoryview)):
            out.append(bytes(e))
        else:
            raise TensorCodecError(
                f"{tensor_label(name)}: BYTES element must be str or bytes, got {type(e).__name__}"
            )
    return out


def flat_numeric(datatype: str, data: Any, name: str | None = None) -> np.ndarray:
    """Caller data -> flat (row-major) array of the decoded dtype (BF16: raw uint16 bits)."""
    what = tensor_label(name)
    arr = data if isinstance(data, np.ndarray) else None
    if arr is None:
        try:
            arr = np.asarray(data)
        except (ValueError, TypeError, OverflowError) as e:
            raise TensorCodecError(f"{what}: cannot make an array of {datatype}: {e}") from e
    arr = arr.reshape(-1)
    kind = arr.dtype.kind
    if datatype == "BF16" and arr.dtype.name == "bfloat16":
        return np.ascontiguousarray(arr).view(np.uint16)
    if kind == "O" or (kind == "V" and arr.dtype.name != "bfloat16"):
        return flat_numeric_objects(datatype, arr.tolist(), name)
    if kind in "US":
        raise TensorCodecError(f"{what}: cannot encode string data as {datatype}")
    if kind == "c":
        raise TensorCodecError(f"{what}: cannot encode complex data as {datatype}")
    if datatype == "BOOL":
        if kind == "b":
            return arr
        if kind in "iu":
            if arr.size and not np.isin(arr, (0, 1)).all():
                raise TensorCodecError(f"{what}: BOOL data must be 0/1 or bool")
            return arr.astype(np.bool_)
        raise TensorCodecError(f"{what}: cannot encode {arr.dtype} data as BOOL")
    if datatype in INT_TYPES:
        target = TRITON_DTYPES[datatype]
        if kind not in "biu":
            raise TensorCodecError(f"{what}: cannot encode {arr.dtype} data as {datatype}")
        if arr.size and kind != "b":
            info = np.iinfo(target)
            lo, hi = int(arr.min()), int(arr.max())
            if lo < info.min or hi > info.max:
                raise TensorCodecError(f"{what}: values [{lo}, {hi}] out of range for {datatype}")
        return arr.astype(target)
    # float types
    if kind not in "biuf" and arr.dtype.name != "bfloat16":
        raise TensorCodecError(f"{what}: cannot encode {arr.dtype} data as {datatype}")
    if datatype == "BF16":
        return _bf16_bits(arr)
    with np.errstate(over="ignore", invalid="ignore"):
        return arr.astype(TRITON_DTYPES[datatype])


def flat_numeric_objects(datatype: str, elems: list[Any], name: str | None) -> np.ndarray:
    """Python scalars -> flat array of the decoded dtype (BF16: raw uint16 bits)."""
    for e in elems:
        if datatype == "BOOL":
            ok = isinstance(e, (bool, np.bool_))
        elif datatype in INT_TYPES:
            ok = isinstance(e, (int, np.integer, np.bool_))
        else:
            ok = isinstance(e, (int, float, np.integer, np.floating, np.bool_))
        if not ok:
            raise TensorCodecError(
                f"{tensor_label(name)}: {datatype} element must be "
                f"{'bool' if datatype == 'BOOL' else 'a number'}, got {e!r}"
            )
    try:
        if datatype == "BF16":
            return _bf16_bits(np.array(elems, dtype=np.float64))
        with np.errstate(over="ignore", invalid="ignore"):
            return np.array(elems, dtype=TRITON_DTYPES[datatype]).reshape(-1)
    except (OverflowError, ValueError, TypeError) as e:
        raise TensorCodecError(f"{tensor_label(name)}: bad {datatype} data: {e}") from e


def object_array(elems: list[Any], shape: tuple[int, ...]) -> np.ndarray:
    """An object array of ``elems`` (numpy would otherwise make fixed-width ``S`` strings)."""
    arr = np.empty(len(elems), dtype=object)
    for i, e in enumerate(elems):
        arr[i] = e
    return arr.reshape(shape)


# ---------------------------------------------------------------------------
# single tensors


def encode_flat(datatype: str, data: Any, name: str | None) -> tuple[bytes, int]:
    """Return (wire bytes, element count)."""
    if datatype == "BYTES":
        elems = flat_bytes(data, name)
        parts = []
        for e in elems:
            parts.append(_U32.pack(len(e)))
            parts.append(e)
        return b"".join(parts), len(elems)
    arr = flat_numeric(datatype, data, name)
    if datatype == "BF16":
        return arr.astype("<u2").tobytes(), arr.size
    return arr.astype(WIRE_DTYPES[datatype]).tobytes(), arr.size


def encode_tensor(datatype: str, data: np.ndarray | Sequence[Any]) -> bytes:
    """Binary wire form of ``data`` (row-major) for ``datatype``."""
    check_datatype(datatype)
    return encode_flat(datatype, data, None)[0]


def _split_bytes(raw: bytes | memoryview, name: str | None, expected: int | None) -> list[bytes]:
    what = tensor_label(name)
    mv = memoryview(raw).cast("B")
    n = len(mv)
    out: list[bytes] = []
    off = 0
    while off < n:
        if expected is not None and len(out) == expected:
            raise TensorCodecError(
                f"{what}: BYTES data has {n - off} trailing byte(s) after {expected} element(s)"
            )
        if off + 4 > n:
            raise TensorCodecError(
                f"{what}: BYTES element {len(out)} length prefix truncated "
                f"({n - off} of 4 bytes at offset {off})"
            )
        (length,) = _U32.unpack_from(mv, off)
        off += 4
        if off + length > n:
            raise TensorCodecError(
                f"{what}: BYTES element {len(out)} claims {length} bytes at offset "
                f"{off} but only {n - off} remain"
            )
        out.append(bytes(mv[off : off + length]))
        off += length
    if expected is not None and len(out) != expected:
        raise TensorCodecError(
            f"{what}: BYTES data has {len(out)} element(s), shape needs {expected}"
        )
    return out


def decode_array(
    datatype: str, shape: tuple[int, ...], raw: bytes | memoryview, name: str | None
) -> np.ndarray:
    """Decode checked ``datatype`` and ``shape``; the size must match exactly."""
    count = math.prod(shape)
    if datatype == "BYTES":
        return object_array(_split_bytes(raw, name, count), shape)
    itemsize = TRITON_ELEMENT_SIZE[datatype]
    assert itemsize is not None
    size = len(memoryview(raw).cast("B"))
    if size != count * itemsize:
        raise TensorCodecError(
            f"{tensor_label(name)}: {datatype} shape {list(shape)} needs {count * itemsize} "
            f"bytes ({count} x {itemsize}), got {size}"
        )
    wire = np.frombuffer(raw, dtype=WIRE_DTYPES[datatype], count=count)
    if datatype == "BOOL":
        if count and wire.max() > 1:
            raise TensorCodecError(f"{tensor_label(name)}: BOOL data has bytes other than 0/1")
        return wire.astype(np.bool_).reshape(shape)
    if datatype == "BF16":
        return bf16_to_float32(wire).reshape(shape)
    return wire.astype(TRITON_DTYPES[datatype]).reshape(shape)  # copy, native order


def decode_tensor(datatype: str, shape: Sequence[int], raw: bytes) -> np.ndarray:
    """Decode binary wire data, checking the size matches ``shape`` exactly.

    BYTES -> object array of ``bytes``; BF16 -> float32; others their numpy dtype.
    The result is a fresh, writable array.
    """
    check_datatype(datatype)
    return decode_array(datatype, check_shape(shape), raw, None)


def decode_raw_binary(body: bytes, datatype: str, shape: Sequence[int]) -> np.ndarray:
    """Decode a raw binary request body (Inference-Header-Content-Length: 0).

    ``shape`` comes from model metadata and may contain one ``-1``, inferred from
    the body size (BYTES: from the element count).
    """
    check_datatype(datatype)
    dims = check_shape(shape, allow_wildcard=True)
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if datatype == "BYTES":
            total = len(_split_bytes(body, None, None))
        else:
            itemsize = TRITON_ELEMENT_SIZE[datatype]
            assert itemsize is not None
            size = len(memoryview(body).cast("B"))
            if size % itemsize:
                raise TensorCodecError(
                    f"raw {datatype} body of {size} bytes is not a multiple of {itemsize}"
                )
            total = size // itemsize
        if known == 0:
            if total:
                raise TensorCodecError(
                    f"raw body has {total} element(s) but shape {list(dims)} holds none"
                )
            inferred = 0
        elif total % known:
            raise TensorCodecError(
                f"raw body has {total} element(s), not divisible into shape {list(dims)}"
            )
        else:
            inferred = total // known
        dims = tuple(inferred if d == -1 else d for d in dims)
    return decode_array(datatype, dims, body, None)
