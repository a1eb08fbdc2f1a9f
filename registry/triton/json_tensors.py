"""Tensors in JSON form: the ``data`` field of v2 inputs and outputs.

``data`` is a flat row-major list (nested lists are accepted on the way in);
BYTES elements are strings, so only UTF-8 can travel as JSON.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from registry.triton.codec import (
    bf16_to_float32,
    flat_bytes,
    flat_numeric,
    flat_numeric_objects,
    flatten_nested,
    object_array,
)
from registry.triton.datatypes import (
    INT_TYPES,
    TRITON_DTYPES,
    check_datatype,
    check_shape,
    tensor_label,
)
from registry.triton.errors import TensorCodecError


def json_tensor_data(datatype: str, array: np.ndarray | Sequence[Any]) -> list[Any]:
    """Flat row-major list for the JSON ``data`` field.

    BYTES -> str (error if not UTF-8); BOOL -> bool; ints -> int; floats -> float
    (NaN/inf are kept here; the JSON body encoders refuse them).
    """
    check_datatype(datatype)
    return json_flat(datatype, array, None)


def json_flat(datatype: str, array: Any, name: str | None) -> list[Any]:
    """``json_tensor_data`` for a checked datatype; errors name the tensor."""
    if datatype == "BYTES":
        out = []
        for i, e in enumerate(flat_bytes(array, name)):
            try:
                out.append(e.decode("utf-8"))
            except UnicodeDecodeError as err:
                raise TensorCodecError(
                    f"{tensor_label(name)}: BYTES element {i} is not UTF-8, send it as binary data"
                ) from err
        return out
    flat = flat_numeric(datatype, array, name)
    if datatype == "BF16":
        flat = bf16_to_float32(flat)
    values: list[Any] = flat.tolist()
    return values


def array_from_json(
    datatype: str, shape: tuple[int, ...], data: Any, name: str | None
) -> np.ndarray:
    """``tensor_from_json`` for a checked datatype and shape; errors name the tensor."""
    what = tensor_label(name)
    count = math.prod(shape)
    flat = flatten_nested(data)
    if len(flat) != count:
        raise TensorCodecError(
            f"{what}: JSON data has {len(flat)} element(s), shape {list(shape)} needs {count}"
        )
    if datatype == "BYTES":
        for e in flat:
            if not isinstance(e, (str, bytes)):
                raise TensorCodecError(f"{what}: BYTES JSON element must be a string, got {e!r}")
        return object_array(flat_bytes(flat, name), shape)
    for e in flat:
        if datatype == "BOOL":
            ok = isinstance(e, bool)
        elif datatype in INT_TYPES:
            ok = isinstance(e, int) and not isinstance(e, bool)
        else:
            ok = isinstance(e, (int, float)) and not isinstance(e, bool)
        if not ok:
            raise TensorCodecError(f"{what}: bad {datatype} JSON element {e!r}")
    arr = flat_numeric_objects(datatype, flat, name) if flat else _empty_numeric(datatype)
    if datatype == "BF16":
        arr = bf16_to_float32(arr)
    return arr.reshape(shape)


def _empty_numeric(datatype: str) -> np.ndarray:
    if datatype == "BF16":
        return np.empty(0, dtype=np.uint16)
    return np.empty(0, dtype=TRITON_DTYPES[datatype])


def tensor_from_json(datatype: str, shape: Sequence[int], data: Any) -> np.ndarray:
    """Array from a JSON ``data`` value, flat (row-major) or nested; count must match."""
    check_datatype(datatype)
    return array_from_json(datatype, check_shape(shape), data, None)
