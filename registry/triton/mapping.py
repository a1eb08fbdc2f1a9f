"""Carton <-> Triton datatypes.

carton dtypes <-> Triton datatypes: ``CARTON_TO_TRITON`` (float32<->FP32,
string<->BYTES, ...). BOOL, FP16 and BF16 have no carton dtype.
"""

from __future__ import annotations

from registry.triton.datatypes import check_datatype

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


def triton_to_carton_dtype(datatype: str) -> str | None:
    """Carton dtype for a Triton datatype; None for BOOL, FP16, BF16.

    Raises TensorCodecError for a string that is not a Triton datatype.
    (BYTES maps to ``string``; the caller must check elements are UTF-8.)
    """
    check_datatype(datatype)
    return TRITON_TO_CARTON.get(datatype)
