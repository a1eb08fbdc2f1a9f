"""Triton / KServe v2 tensor data: binary tensor extension and JSON forms.

Pure library (stdlib + numpy).  See ``/work/shared/spec/triton-binary-tensor-data.md``.

Wire rules:

* fixed-size types are little-endian, row-major, no padding; BOOL is one byte 0/1;
* BYTES elements are a 4-byte little-endian unsigned length followed by the bytes;
* BF16 is the upper 16 bits of an IEEE float32.  Encoding from float data rounds
  to nearest even (NaN becomes the canonical quiet NaN, sign kept), which is what
  tritonclient >= 2.5x sends (it serialises ``ml_dtypes.bfloat16`` arrays, and
  ``numpy -> bfloat16`` conversion rounds).  Arrays whose dtype is
  ``ml_dtypes.bfloat16`` are sent bit-exact.  Decoding yields float32 arrays.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "CARTON_TO_TRITON",
    "TRITON_DTYPES",
    "TRITON_ELEMENT_SIZE",
    "TRITON_TO_CARTON",
    "TensorCodecError",
    "WireTensor",
    "decode_infer_body",
    "decode_raw_binary",
    "decode_tensor",
    "encode_infer_request",
    "encode_infer_response",
    "encode_tensor",
    "json_tensor_data",
    "tensor_from_json",
    "triton_to_carton_dtype",
]


class TensorCodecError(ValueError):
    """Malformed tensor data (wrong size, bad datatype, bad shape, bad JSON...)."""


# Decoded (in-memory) numpy dtype per Triton datatype.  BF16 decodes to float32;
# BYTES is an object array of ``bytes``.
TRITON_DTYPES: dict[str, np.dtype | None] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BYTES": None,
    "BF16": np.dtype(np.float32),
}

# Bytes per element on the wire (None: variable, BYTES).
TRITON_ELEMENT_SIZE: dict[str, int | None] = {
    "BOOL": 1,
    "UINT8": 1,
    "UINT16": 2,
    "UINT32": 4,
    "UINT64": 8,
    "INT8": 1,
    "INT16": 2,
    "INT32": 4,
    "INT64": 8,
    "FP16": 2,
    "FP32": 4,
    "FP64": 8,
    "BYTES": None,
    "BF16": 2,
}

# Little-endian wire dtype (BF16 travels as its uint16 bit pattern).
_WIRE_DTYPES: dict[str, np.dtype] = {
    "BOOL": np.dtype("u1"),
    "UINT8": np.dtype("u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
    "BF16": np.dtype("<u2"),
}

CARTON_TO_TRITON: dict[str, str] = {
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
TRITON_TO_CARTON: dict[str, str] = {v: k for k, v in CARTON_TO_TRITON.items()}

_INT_TYPES = frozenset({"UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64"})
_FLOAT_TYPES = frozenset({"FP16", "FP32", "FP64", "BF16"})
_U32 = struct.Struct("<I")


def _what(name: str | None) -> str:
    return f"tensor {name!r}" if name is not None else "tensor"


def _check_datatype(datatype: Any, name: str | None = None) -> str:
    if not isinstance(datatype, str) or datatype not in TRITON_DTYPES:
        raise TensorCodecError(f"{_what(name)}: unknown datatype {datatype!r}")
    return datatype


def triton_to_carton_dtype(datatype: str) -> str | None:
    """Carton dtype for a Triton datatype; None for BOOL, FP16, BF16.

    Raises TensorCodecError for a string that is not a Triton datatype.
    (BYTES maps to ``string``; the caller must check elements are UTF-8.)
    """
    _check_datatype(datatype)
    return TRITON_TO_CARTON.get(datatype)


def _check_shape(shape: Any, name: str | None = None, *, allow_wildcard: bool = False) -> tuple:
    if isinstance(shape, (str, bytes)) or not isinstance(shape, (Sequence, np.ndarray)):
        raise TensorCodecError(f"{_what(name)}: shape must be a list of integers, got {shape!r}")
    out = []
    for d in shape:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise TensorCodecError(
                f"{_what(name)}: shape {list(shape)!r} has non-integer dim {d!r}"
            )
        d = int(d)
        if d < 0 and not (allow_wildcard and d == -1):
            raise TensorCodecError(f"{_what(name)}: shape {list(shape)!r} has negative dim {d}")
        out.append(d)
    if allow_wildcard and out.count(-1) > 1:
        raise TensorCodecError(f"{_what(name)}: shape {out!r} has more than one -1 dim")
    return tuple(out)


# ---------------------------------------------------------------------------
# BF16 helpers


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


def _bf16_to_float32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


# ---------------------------------------------------------------------------
# coercion of caller data


def _flatten_nested(data: Any, name: str | None) -> list:
    """Flatten (possibly nested) lists/tuples row-major; a bare scalar is one element."""
    if isinstance(data, np.ndarray):
        return list(data.reshape(-1))
    if not isinstance(data, (list, tuple)):
        return [data]
    out: list = []
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


def _flat_bytes(data: Any, name: str | None = None) -> list[bytes]:
    elems = _flatten_nested(data, name)
    out: list[bytes] = []
    for e in elems:
        if isinstance(e, bytes):  # includes np.bytes_
            out.append(bytes(e))
        elif isinstance(e, str):  # includes np.str_
            out.append(e.encode("utf-8"))
        elif isinstance(e, (bytearray, memoryview)):
            out.append(bytes(e))
        else:
            raise TensorCodecError(
                f"{_what(name)}: BYTES element must be str or bytes, got {type(e).__name__}"
            )
    return out


def _flat_numeric(datatype: str, data: Any, name: str | None = None) -> np.ndarray:
    """Caller data -> flat (row-major) array of the decoded dtype (BF16: raw uint16 bits)."""
    arr = data if isinstance(data, np.ndarray) else None
    if arr is None:
        try:
            arr = np.asarray(data)
        except (ValueError, TypeError, OverflowError) as e:
            raise TensorCodecError(f"{_what(name)}: cannot make an array of {datatype}: {e}") from e
    arr = arr.reshape(-1)
    kind = arr.dtype.kind
    if datatype == "BF16" and arr.dtype.name == "bfloat16":
        return np.ascontiguousarray(arr).view(np.uint16)
    if kind == "O" or (kind == "V" and arr.dtype.name != "bfloat16"):
        return _flat_numeric_objects(datatype, arr.tolist(), name)
    if kind in "US":
        raise TensorCodecError(f"{_what(name)}: cannot encode string data as {datatype}")
    if kind == "c":
        raise TensorCodecError(f"{_what(name)}: cannot encode complex data as {datatype}")
    if datatype == "BOOL":
        if kind == "b":
            return arr
        if kind in "iu":
            if arr.size and not np.isin(arr, (0, 1)).all():
                raise TensorCodecError(f"{_what(name)}: BOOL data must be 0/1 or bool")
            return arr.astype(np.bool_)
        raise TensorCodecError(f"{_what(name)}: cannot encode {arr.dtype} data as BOOL")
    if datatype in _INT_TYPES:
        target = TRITON_DTYPES[datatype]
        if kind not in "biu":
            raise TensorCodecError(f"{_what(name)}: cannot encode {arr.dtype} data as {datatype}")
        if arr.size and kind != "b":
            info = np.iinfo(target)
            lo, hi = int(arr.min()), int(arr.max())
            if lo < info.min or hi > info.max:
                raise TensorCodecError(
                    f"{_what(name)}: values [{lo}, {hi}] out of range for {datatype}"
                )
        return arr.astype(target)
    # float types
    if kind not in "biuf" and arr.dtype.name != "bfloat16":
        raise TensorCodecError(f"{_what(name)}: cannot encode {arr.dtype} data as {datatype}")
    if datatype == "BF16":
        return _bf16_bits(arr)
    with np.errstate(over="ignore", invalid="ignore"):
        return arr.astype(TRITON_DTYPES[datatype])


def _flat_numeric_objects(datatype: str, elems: list, name: str | None) -> np.ndarray:
    for e in elems:
        if datatype == "BOOL":
            ok = isinstance(e, (bool, np.bool_))
        elif datatype in _INT_TYPES:
            ok = isinstance(e, (int, np.integer, np.bool_))
        else:
            ok = isinstance(e, (int, float, np.integer, np.floating, np.bool_))
        if not ok:
            raise TensorCodecError(
                f"{_what(name)}: {datatype} element must be "
                f"{'bool' if datatype == 'BOOL' else 'a number'}, got {e!r}"
            )
    try:
        if datatype == "BF16":
            return _bf16_bits(np.array(elems, dtype=np.float64))
        with np.errstate(over="ignore", invalid="ignore"):
            return np.array(elems, dtype=TRITON_DTYPES[datatype]).reshape(-1)
    except (OverflowError, ValueError, TypeError) as e:
        raise TensorCodecError(f"{_what(name)}: bad {datatype} data: {e}") from e


# ---------------------------------------------------------------------------
# single tensors


def _encode_flat(datatype: str, data: Any, name: str | None) -> tuple[bytes, int]:
    """Return (wire bytes, element count)."""
    if datatype == "BYTES":
        elems = _flat_bytes(data, name)
        parts = []
        for e in elems:
            parts.append(_U32.pack(len(e)))
            parts.append(e)
        return b"".join(parts), len(elems)
    arr = _flat_numeric(datatype, data, name)
    if datatype == "BF16":
        return arr.astype("<u2").tobytes(), arr.size
    return arr.astype(_WIRE_DTYPES[datatype]).tobytes(), arr.size


def encode_tensor(datatype: str, data: np.ndarray | Sequence) -> bytes:
    """Binary wire form of ``data`` (row-major) for ``datatype``."""
    _check_datatype(datatype)
    return _encode_flat(datatype, data, None)[0]


def _split_bytes(raw: bytes | memoryview, name: str | None, expected: int | None) -> list[bytes]:
    mv = memoryview(raw).cast("B")
    n = len(mv)
    out: list[bytes] = []
    off = 0
    while off < n:
        if expected is not None and len(out) == expected:
            raise TensorCodecError(
                f"{_what(name)}: BYTES data has {n - off} trailing byte(s) after "
                f"{expected} element(s)"
            )
        if off + 4 > n:
            raise TensorCodecError(
                f"{_what(name)}: BYTES element {len(out)} length prefix truncated "
                f"({n - off} of 4 bytes at offset {off})"
            )
        (length,) = _U32.unpack_from(mv, off)
        off += 4
        if off + length > n:
            raise TensorCodecError(
                f"{_what(name)}: BYTES element {len(out)} claims {length} bytes at offset "
                f"{off} but only {n - off} remain"
            )
        out.append(bytes(mv[off : off + length]))
        off += length
    if expected is not None and len(out) != expected:
        raise TensorCodecError(
            f"{_what(name)}: BYTES data has {len(out)} element(s), shape needs {expected}"
        )
    return out


def _object_array(elems: list, shape: tuple) -> np.ndarray:
    arr = np.empty(len(elems), dtype=object)
    for i, e in enumerate(elems):
        arr[i] = e
    return arr.reshape(shape)


def _decode(datatype: str, shape: tuple, raw: Any, name: str | None) -> np.ndarray:
    count = math.prod(shape)
    if datatype == "BYTES":
        return _object_array(_split_bytes(raw, name, count), shape)
    itemsize = TRITON_ELEMENT_SIZE[datatype]
    assert itemsize is not None
    size = len(memoryview(raw).cast("B"))
    if size != count * itemsize:
        raise TensorCodecError(
            f"{_what(name)}: {datatype} shape {list(shape)} needs {count * itemsize} bytes "
            f"({count} x {itemsize}), got {size}"
        )
    wire = np.frombuffer(raw, dtype=_WIRE_DTYPES[datatype], count=count)
    if datatype == "BOOL":
        if count and wire.max() > 1:
            raise TensorCodecError(f"{_what(name)}: BOOL data has bytes other than 0/1")
        return wire.astype(np.bool_).reshape(shape)
    if datatype == "BF16":
        return _bf16_to_float32(wire).reshape(shape)
    return wire.astype(TRITON_DTYPES[datatype]).reshape(shape)  # copy, native order


def decode_tensor(datatype: str, shape: Sequence[int], raw: bytes) -> np.ndarray:
    """Decode binary wire data, checking the size matches ``shape`` exactly.

    BYTES -> object array of ``bytes``; BF16 -> float32; others their numpy dtype.
    The result is a fresh, writable array.
    """
    _check_datatype(datatype)
    return _decode(datatype, _check_shape(shape), raw, None)


def decode_raw_binary(body: bytes, datatype: str, shape: Sequence[int]) -> np.ndarray:
    """Decode a raw binary request body (Inference-Header-Content-Length: 0).

    ``shape`` comes from model metadata and may contain one ``-1``, inferred from
    the body size (BYTES: from the element count).
    """
    _check_datatype(datatype)
    dims = _check_shape(shape, allow_wildcard=True)
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
    return _decode(datatype, dims, body, None)


# ---------------------------------------------------------------------------
# JSON forms


def json_tensor_data(datatype: str, array: np.ndarray | Sequence) -> list:
    """Flat row-major list for the JSON ``data`` field.

    BYTES -> str (error if not UTF-8); BOOL -> bool; ints -> int; floats -> float
    (NaN/inf are kept here; the JSON body encoders refuse them).
    """
    _check_datatype(datatype)
    return _json_flat(datatype, array, None)


def _json_flat(datatype: str, array: Any, name: str | None) -> list:
    if datatype == "BYTES":
        out = []
        for i, e in enumerate(_flat_bytes(array, name)):
            try:
                out.append(e.decode("utf-8"))
            except UnicodeDecodeError as err:
                raise TensorCodecError(
                    f"{_what(name)}: BYTES element {i} is not UTF-8, send it as binary data"
                ) from err
        return out
    flat = _flat_numeric(datatype, array, name)
    if datatype == "BF16":
        flat = _bf16_to_float32(flat)
    return flat.tolist()


def _from_json(datatype: str, shape: tuple, data: Any, name: str | None) -> np.ndarray:
    count = math.prod(shape)
    flat = _flatten_nested(data, name)
    if len(flat) != count:
        raise TensorCodecError(
            f"{_what(name)}: JSON data has {len(flat)} element(s), shape {list(shape)} "
            f"needs {count}"
        )
    if datatype == "BYTES":
        for e in flat:
            if not isinstance(e, (str, bytes)):
                raise TensorCodecError(
                    f"{_what(name)}: BYTES JSON element must be a string, got {e!r}"
                )
        return _object_array(_flat_bytes(flat, name), shape)
    for e in flat:
        if datatype == "BOOL":
            ok = isinstance(e, bool)
        elif datatype in _INT_TYPES:
            ok = isinstance(e, int) and not isinstance(e, bool)
        else:
            ok = isinstance(e, (int, float)) and not isinstance(e, bool)
        if not ok:
            raise TensorCodecError(f"{_what(name)}: bad {datatype} JSON element {e!r}")
    arr = _flat_numeric_objects(datatype, flat, name) if flat else _empty_numeric(datatype)
    if datatype == "BF16":
        arr = _bf16_to_float32(arr)
    return arr.reshape(shape)


def _empty_numeric(datatype: str) -> np.ndarray:
    if datatype == "BF16":
        return np.empty(0, dtype=np.uint16)
    return np.empty(0, dtype=TRITON_DTYPES[datatype])


def tensor_from_json(datatype: str, shape: Sequence[int], data: Any) -> np.ndarray:
    """Array from a JSON ``data`` value, flat (row-major) or nested; count must match."""
    _check_datatype(datatype)
    return _from_json(datatype, _check_shape(shape), data, None)


# ---------------------------------------------------------------------------
# whole bodies


@dataclass
class WireTensor:
    """One input/output tensor.  ``parameters`` excludes ``binary_data_size``."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    data: np.ndarray
    parameters: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.shape = tuple(self.shape)  # validated when encoded


def _dumps(obj: Any) -> bytes:
    try:
        return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode("ascii")
    except ValueError as e:
        raise TensorCodecError(
            f"tensor data not representable as JSON ({e}); send it as binary data"
        ) from e


def _wants_binary(binary: bool | Collection[str], name: str) -> bool:
    if isinstance(binary, bool):
        return binary
    return name in binary


def _tensor_entries(
    tensors: Sequence[WireTensor], binary: bool | Collection[str]
) -> tuple[list[dict], list[bytes]]:
    entries: list[dict] = []
    chunks: list[bytes] = []
    for t in tensors:
        _check_datatype(t.datatype, t.name)
        shape = _check_shape(t.shape, t.name)
        count = math.prod(shape)
        params = {k: v for k, v in (t.parameters or {}).items() if k != "binary_data_size"}
        entry: dict[str, Any] = {"name": t.name, "shape": list(shape), "datatype": t.datatype}
        if _wants_binary(binary, t.name):
            raw, n = _encode_flat(t.datatype, t.data, t.name)
            params["binary_data_size"] = len(raw)
            chunks.append(raw)
        else:
            data = _json_flat(t.datatype, t.data, t.name)
            n = len(data)
        if n != count:
            raise TensorCodecError(
                f"tensor {t.name!r}: data has {n} element(s), shape {list(shape)} needs {count}"
            )
        if params:
            entry["parameters"] = params
        if not _wants_binary(binary, t.name):
            entry["data"] = data
        entries.append(entry)
    return entries, chunks


def _assemble(header: dict, chunks: list[bytes], binary: bool | Collection[str]):
    head = _dumps(header)
    if binary is False:
        return head, None
    return head + b"".join(chunks), len(head)


def encode_infer_request(
    inputs: Sequence[WireTensor],
    outputs: Sequence[str],
    *,
    binary: bool | Collection[str] = True,
    request_id: str | None = None,
    binary_outputs: bool = True,
    parameters: dict | None = None,
) -> tuple[bytes, int | None]:
    """Build an infer request body; returns (body, Inference-Header-Content-Length).

    ``binary`` may also be a collection of input names to send as binary (others JSON).
    With ``binary=False`` the body is pure JSON and the length is None.  Key order
    matches tritonclient, so the body is byte-identical to what it sends.  With no
    ``outputs`` and ``binary_outputs``, ``"binary_data_output": true`` is set.
    """
    entries, chunks = _tensor_entries(inputs, binary)
    header: dict[str, Any] = {}
    if request_id is not None:
        header["id"] = request_id
    header["inputs"] = entries
    params = dict(parameters or {})
    if outputs:
        header["outputs"] = [
            {"name": n, "parameters": {"binary_data": bool(binary_outputs)}} for n in outputs
        ]
    elif binary_outputs:
        params["binary_data_output"] = True
    if params:
        header["parameters"] = params
    return _assemble(header, chunks, binary)


def encode_infer_response(
    model_name: str,
    outputs: Sequence[WireTensor],
    *,
    binary: bool | Collection[str] = True,
    model_version: str | None = None,
    request_id: str | None = None,
    parameters: dict | None = None,
) -> tuple[bytes, int | None]:
    """Build an infer response body; returns (body, Inference-Header-Content-Length).

    ``binary`` may be a collection of output names to send as binary (others JSON).
    """
    entries, chunks = _tensor_entries(outputs, binary)
    header: dict[str, Any] = {"model_name": model_name}
    if model_version is not None:
        header["model_version"] = model_version
    if request_id is not None:
        header["id"] = request_id
    if parameters:
        header["parameters"] = dict(parameters)
    header["outputs"] = entries
    return _assemble(header, chunks, binary)


def decode_infer_body(
    body: bytes, header_length: int | None, *, key: str = "outputs"
) -> tuple[dict, list[WireTensor]]:
    """Parse a request (``key="inputs"``) or response (``key="outputs"``) body.

    Returns (JSON header dict, tensors).  ``header_length`` None means the whole
    body is JSON; 0 (raw binary request) is refused: use :func:`decode_raw_binary`.
    """
    mv = memoryview(body).cast("B")
    if header_length is None:
        head, binsec = mv, mv[len(mv) :]
    else:
        if isinstance(header_length, bool) or not isinstance(header_length, int):
            raise TensorCodecError(f"bad inference header length {header_length!r}")
        if header_length == 0:
            raise TensorCodecError(
                "raw binary body (header length 0) needs model metadata; use decode_raw_binary"
            )
        if header_length < 0 or header_length > len(mv):
            raise TensorCodecError(
                f"inference header length {header_length} outside body of {len(mv)} bytes"
            )
        head, binsec = mv[:header_length], mv[header_length:]
    try:
        header = json.loads(bytes(head))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise TensorCodecError(f"inference header is not valid JSON: {e}") from e
    if not isinstance(header, dict):
        raise TensorCodecError("inference header must be a JSON object")
    entries = header.get(key, [])
    if not isinstance(entries, list):
        raise TensorCodecError(f"{key!r} must be a list")

    specs = []
    total = 0
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise TensorCodecError(f"{key}[{i}] must be an object")
        name = entry.get("name")
        if not isinstance(name, str):
            raise TensorCodecError(f"{key}[{i}]: missing or non-string name")
        datatype = _check_datatype(entry.get("datatype"), name)
        if "shape" not in entry:
            raise TensorCodecError(f"tensor {name!r}: missing shape")
        shape = _check_shape(entry["shape"], name)
        params = entry.get("parameters", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise TensorCodecError(f"tensor {name!r}: parameters must be an object")
        size = params.get("binary_data_size")
        if size is not None:
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise TensorCodecError(f"tensor {name!r}: bad binary_data_size {size!r}")
            if "data" in entry:
                raise TensorCodecError(f"tensor {name!r}: has both data and binary_data_size")
            total += size
        elif "data" not in entry:
            raise TensorCodecError(f"tensor {name!r}: no data and no binary_data_size")
        specs.append((name, datatype, shape, params, size, entry.get("data")))
    if total != len(binsec):
        raise TensorCodecError(
            f"binary_data_size values add up to {total} bytes but the binary section "
            f"is {len(binsec)} bytes"
        )

    tensors: list[WireTensor] = []
    off = 0
    for name, datatype, shape, params, size, data in specs:
        if size is not None:
            arr = _decode(datatype, shape, binsec[off : off + size], name)
            off += size
        else:
            arr = _from_json(datatype, shape, data, name)
        rest = {k: v for k, v in params.items() if k != "binary_data_size"}
        tensors.append(WireTensor(name, datatype, shape, arr, rest))
    return header, tensors
