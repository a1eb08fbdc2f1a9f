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

import numpy as np

from registry.triton.codec import decode_array, encode_flat
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
    header: dict, chunks: list[bytes], binary: bool | Collection[str]
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
    body is JSON; 0 (raw binary request) is refused: use
    :func:`registry.triton.codec.decode_raw_binary`.
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
            arr = decode_array(datatype, shape, binsec[off : off + size], name)
            off += size
        else:
            arr = array_from_json(datatype, shape, data, name)
        rest = {k: v for k, v in params.items() if k != "binary_data_size"}
        tensors.append(WireTensor(name, datatype, shape, arr, rest))
    return header, tensors
