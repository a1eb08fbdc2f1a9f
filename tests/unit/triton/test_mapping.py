"""Carton <-> Triton dtypes (registry.triton.mapping): no DB, no HTTP."""

from __future__ import annotations

import numpy as np
import pytest

from registry.triton.datatypes import TRITON_DTYPES
from registry.triton.errors import TensorCodecError
from registry.triton.mapping import CARTON_TO_TRITON, triton_to_carton_dtype


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
