"""Triton datatypes: their numpy forms, and the checks every codec shares (the names and
wire sizes, which need no numpy, are in ``datatype_names``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from registry.triton.datatype_names import (
    TRITON_ELEMENT_SIZE,
    check_datatype,
    tensor_label,
)
from registry.triton.errors import TensorCodecError

__all__ = [
    "INT_TYPES",
    "TRITON_DTYPES",
    "TRITON_ELEMENT_SIZE",
    "WIRE_DTYPES",
    "check_datatype",
    "check_shape",
    "tensor_label",
]

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

# Little-endian wire dtype (BF16 travels as its uint16 bit pattern).
WIRE_DTYPES: dict[str, np.dtype] = {
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

INT_TYPES = frozenset({"UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64"})


def check_shape(
    shape: Any, name: str | None = None, *, allow_wildcard: bool = False
) -> tuple[int, ...]:
    """A shape as a tuple of dims >= 0 (and at most one ``-1`` with ``allow_wildcard``)."""
    what = tensor_label(name)
    if isinstance(shape, (str, bytes)) or not isinstance(shape, (Sequence, np.ndarray)):
        raise TensorCodecError(f"{what}: shape must be a list of integers, got {shape!r}")
    out = []
    for d in shape:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise TensorCodecError(f"{what}: shape {list(shape)!r} has non-integer dim {d!r}")
        d = int(d)
        if d < 0 and not (allow_wildcard and d == -1):
            raise TensorCodecError(f"{what}: shape {list(shape)!r} has negative dim {d}")
        out.append(d)
    if allow_wildcard and out.count(-1) > 1:
        raise TensorCodecError(f"{what}: shape {out!r} has more than one -1 dim")
    return tuple(out)
