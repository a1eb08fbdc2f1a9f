"""Triton datatypes by name: wire sizes and the datatype check, without numpy.

The server's metadata routes (``triton.mapping``) need only these; numpy (12 MiB in each
server worker) loads with ``datatypes`` when a tensor is first encoded or decoded.
"""

from __future__ import annotations

from typing import Any

from registry.triton.errors import TensorCodecError

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


def tensor_label(name: str | None) -> str:
    """How an error message names a tensor (anonymous single tensors have no name)."""
    return f"tensor {name!r}" if name is not None else "tensor"


def check_datatype(datatype: Any, name: str | None = None) -> str:
    if not isinstance(datatype, str) or datatype not in TRITON_ELEMENT_SIZE:
        raise TensorCodecError(f"{tensor_label(name)}: unknown datatype {datatype!r}")
    return datatype
