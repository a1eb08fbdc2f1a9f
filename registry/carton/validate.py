"""The one check of a carton's tensor_data, shared by ``inspect``, push and v2 load.

Callers differ only in where bytes come from (a local zip, the blob store), so
the check takes two functions: the size of a MANIFEST path's file (None when
it cannot be known without fetching, as for a linked file during ``inspect``),
and the bytes of a small file.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import CartonFormatError
from .manifest import Manifest
from .paths import TENSOR_INDEX
from .tensor_data import (
    NESTED,
    NUMPY_DTYPES,
    TensorIndexEntry,
    decode_string_tensor,
)

MAX_STRING_TENSOR_CHECK = 16 << 20
"""String tensors larger than this are not decoded to count their values."""


def tensor_problems(
    entries: list[TensorIndexEntry],
    manifest: Manifest,
    size_of: Callable[[str], int | None],
    read_bytes: Callable[[str], bytes],
) -> list[str]:
    """Each tensor file is in MANIFEST and holds what its dtype and shape say.

    Numeric tensors need exactly itemsize x product(shape) bytes; string
    tensors must be TOML holding as many strings as the shape has elements.
    """
    problems: list[str] = []
    for e in entries:
        if e.dtype == NESTED or e.path is None or e.shape is None:
            continue
        if e.path not in manifest:
            problems.append(f"{TENSOR_INDEX}: tensor {e.name!r}: {e.path} is not in MANIFEST")
            continue
        size = size_of(e.path)
        if size is None:
            continue  # linked and not fetched: nothing to check against
        if e.dtype in NUMPY_DTYPES:
            need = NUMPY_DTYPES[e.dtype].itemsize
            for d in e.shape:
                need *= d
            if size != need:
                problems.append(
                    f"{e.path}: {e.dtype} tensor {e.name!r} of shape {list(e.shape)} "
                    f"needs {need} bytes, has {size}"
                )
        elif size <= MAX_STRING_TENSOR_CHECK:
            try:
                decode_string_tensor(read_bytes(e.path), e.shape)
            except CartonFormatError as err:
                problems.append(f"{e.path}: {err.message}")
    return problems
