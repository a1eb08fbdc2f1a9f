"""Whole infer request and response bodies: a JSON header, then the binary section.

``Inference-Header-Content-Length`` says where the JSON ends; each binary tensor's
``binary_data_size`` slices the rest in order.  Key order matches tritonclient,
so an encoded request is byte-identical to what it sends.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from registry.triton.codec import decode_array, encode_flat, flat_bytes
from registry.triton.datatypes import check_datatype, check_shape
from registry.triton.errors import TensorCodecError
from registry.triton.json_tensors import array_from_json, json_flat


@dataclass
class WireTensor:
    """One input/output tensor.  ``parameters`` excludes ``binary_data_size``."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    data: np.ndarray
    parameters: dict[str, Any] = field(default_factory=dict)

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
) -> tuple[list[dict[str, Any]], list[bytes]]:
    entries: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    for t in tensors:
        check_datatype(t.datatype, t.name)
        shape = check_shape(t.shape, t.name)
        count = math.prod(shape)
        params = {k: v for k, v in (t.parameters or {}).items() if k != "binary_data_size"}
        entry: dict[str, Any] = {"name": t.name, "shape": list(shape), "datatype": t.datatype}
        if _wants_binary(binary, t.name):
            raw, n = encode_flat(t.datatype, t.data, t.name)
            params["binary_data_size"] = len(raw)
            chunks.append(raw)
        else:
            data = json_flat(t.datatype, t.data, t.name)
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


def _assemble(
    header: dict[str, Any], chunks: list[bytes], binary: bool | Collection[str]
) -> tuple[bytes, int | None]:
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
    parameters: dict[str, Any] | None = None,
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
    parameters: dict[str, Any] | None = None,
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


def _json(raw: bytes | memoryview | msgspec.Raw, what: str) -> Any:
    try:
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError) as e:
        raise TensorCodecError(f"{what} is not valid JSON: {e}") from e


def decode_infer_body(
    body: bytes | bytearray | memoryview, header_length: int | None, *, key: str = "outputs"
) -> tuple[dict[str, Any], list[WireTensor]]:
    """Parse a request (``key="inputs"``) or response (``key="outputs"``) body.

    Returns (JSON header dict, tensors).  ``header_length`` None means the whole
    body is JSON; 0 (raw binary request) is refused: use
    :func:`registry.triton.codec.decode_raw_binary`.

    Memory: the body is never copied (binary data is sliced by memoryview), and each
    tensor's JSON ``data`` is decoded only while that tensor is built, so at most one
    tensor's Python values exist at a time; the header's ``key`` entries are returned
    without their ``data``.
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
        fields = msgspec.json.decode(head, type=dict[str, msgspec.Raw])
    except msgspec.ValidationError as e:
        raise TensorCodecError("inference header must be a JSON object") from e
    except (msgspec.DecodeError, RecursionError) as e:
        raise TensorCodecError(f"inference header is not valid JSON: {e}") from e
    header = {k: _json(v, "inference header") for k, v in fields.items() if k != key}
    raw_entries: list[msgspec.Raw] = []
    if key in fields:
        header[key] = []
        try:
            raw_entries = msgspec.json.decode(fields[key], type=list[msgspec.Raw])
        except msgspec.ValidationError as e:
            raise TensorCodecError(f"{key!r} must be a list") from e

    specs = []
    total = 0
    for i, raw_entry in enumerate(raw_entries):
        try:
            raw_fields = msgspec.json.decode(raw_entry, type=dict[str, msgspec.Raw])
        except msgspec.ValidationError as e:
            raise TensorCodecError(f"{key}[{i}] must be an object") from e
        data = raw_fields.pop("data", None)
        entry = {k: _json(v, f"{key}[{i}]") for k, v in raw_fields.items()}
        name = entry.get("name")
        if not isinstance(name, str):
            raise TensorCodecError(f"{key}[{i}]: missing or non-string name")
        datatype = check_datatype(entry.get("datatype"), name)
        if "shape" not in entry:
            raise TensorCodecError(f"tensor {name!r}: missing shape")
        shape = check_shape(entry["shape"], name)
        params = entry.get("parameters", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise TensorCodecError(f"tensor {name!r}: parameters must be an object")
        size = params.get("binary_data_size")
        if size is not None:
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise TensorCodecError(f"tensor {name!r}: bad binary_data_size {size!r}")
            if data is not None:
                raise TensorCodecError(f"tensor {name!r}: has both data and binary_data_size")
            total += size
        elif data is None:
            raise TensorCodecError(f"tensor {name!r}: no data and no binary_data_size")
        specs.append((name, datatype, shape, params, size, data))
        header[key].append(entry)
    if total != len(binsec):
        raise TensorCodecError(
            f"binary_data_size values add up to {total} bytes but the binary section "
            f"is {len(binsec)} bytes"
        )

    tensors: list[WireTensor] = []
    off = 0
    for name, datatype, shape, params, size, data in specs:
        if size is not None:
            arr = decode_array(datatype, shape, binsec[off : off + size], name)
            off += size
        else:
            assert data is not None  # a tensor without binary_data_size was refused above
            arr = array_from_json(datatype, shape, _json(data, f"tensor {name!r} data"), name)
        rest = {k: v for k, v in params.items() if k != "binary_data_size"}
        tensors.append(WireTensor(name, datatype, shape, arr, rest))
    return header, tensors


# What a JSON infer response may spend on one element of each datatype: its longest
# number (``-2.2250738585072014e-308``, ``-9223372036854775808``, ``false``) plus room
# for separators, nesting brackets and indentation.
JSON_PUNCTUATION = 16
_LONGEST_JSON_NUMBER = {
    "BOOL": 5,
    "UINT8": 3,
    "INT8": 4,
    "UINT16": 5,
    "INT16": 6,
    "UINT32": 10,
    "INT32": 11,
    "UINT64": 20,
    "INT64": 20,
    "FP16": 24,
    "FP32": 24,
    "FP64": 24,
    "BF16": 24,
}


def json_size_bound(tensor: WireTensor) -> int:
    """The most bytes ``tensor``'s data takes in a JSON body (or, smaller, a binary one).

    BYTES elements are strings: each byte escaped as ``\\u00XX`` at worst.
    """
    if tensor.datatype == "BYTES":
        elements = flat_bytes(tensor.data, tensor.name)
        return sum(6 * len(e) + 2 + JSON_PUNCTUATION for e in elements)
    count = math.prod(tensor.shape)
    return count * (_LONGEST_JSON_NUMBER[tensor.datatype] + JSON_PUNCTUATION)
