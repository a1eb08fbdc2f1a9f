"""Weights files' tensor tables, from their headers alone: safetensors and ``.npy``.

A diff needs each tensor's name, dtype, shape and the byte range of its data, never
the data: a safetensors file is an 8-byte little-endian header length, a JSON header
(``{name: {dtype, shape, data_offsets: [begin, end]}}``, offsets relative to the end
of the header, plus an optional ``__metadata__``), then the data. A ``.npy`` file is
one array: a magic string, a version, a header length and a Python-literal dict
(``descr``, ``fortran_order``, ``shape``), then the data. The caller reads the first
``HEAD_BYTES`` of the file (the length fields), then the rest of the header when
``HeaderNeed`` says how long it is, and calls the parser again with all of it: a diff
reads the headers and nothing more.

Pure and distrustful: a malformed header is a ``WeightsHeaderError``, never a crash,
and nothing here allocates more than the header's bytes.
"""

from __future__ import annotations

import ast
import json
import struct
from dataclasses import dataclass

HEAD_BYTES = 16
"""What a first ranged read fetches: a safetensors length, or a .npy preamble."""
MAX_HEADER_BYTES = 32 * 1024 * 1024
"""A larger header is refused (safetensors' own limit is 100 MB; no real model comes near)."""

SAFETENSORS_SUFFIXES = (".safetensors",)
NPY_SUFFIXES = (".npy",)
_NPY_MAGIC = b"\x93NUMPY"


class WeightsHeaderError(ValueError):
    """The bytes are not a header this module can read."""


@dataclass(frozen=True)
class TensorEntry:
    """One tensor: ``[start, end)`` are absolute byte offsets of its data in the file."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int


@dataclass(frozen=True)
class HeaderNeed:
    """The header is longer than what was read: read the first ``needed`` bytes."""

    needed: int


def weights_kind(path: str) -> str | None:
    """``"safetensors"``, ``"npy"`` or None, by the file name."""
    lower = path.lower()
    if lower.endswith(SAFETENSORS_SUFFIXES):
        return "safetensors"
    if lower.endswith(NPY_SUFFIXES):
        return "npy"
    return None


def parse_header(
    kind: str, head: bytes, file_size: int, name: str = ""
) -> list[TensorEntry] | HeaderNeed:
    """The tensors of a ``kind`` file whose first bytes are ``head`` (see the module doc).

    ``name`` names a ``.npy`` file's one tensor.
    """
    if kind == "safetensors":
        return _safetensors(head, file_size)
    if kind == "npy":
        return _npy(head, file_size, name)
    raise WeightsHeaderError(f"unknown weights format {kind!r}")


def _safetensors(head: bytes, file_size: int) -> list[TensorEntry] | HeaderNeed:
    if len(head) < 8:
        if file_size < 8:
            raise WeightsHeaderError("shorter than a safetensors header length")
        return HeaderNeed(8)
    (length,) = struct.unpack_from("<Q", head)
    if length > MAX_HEADER_BYTES or 8 + length > file_size:
        raise WeightsHeaderError(f"header length {length} does not fit the file")
    if len(head) < 8 + length:
        return HeaderNeed(8 + length)
    try:
        header = json.loads(head[8 : 8 + length])
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise WeightsHeaderError(f"header is not JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise WeightsHeaderError("header is not a JSON object")
    base = 8 + length
    tensors = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict):
            raise WeightsHeaderError(f"tensor {name!r}: not an object")
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if not isinstance(dtype, str) or not isinstance(shape, list) or not _is_shape(shape):
            raise WeightsHeaderError(f"tensor {name!r}: bad dtype or shape")
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(_is_count(o) for o in offsets)
            or offsets[0] > offsets[1]
            or base + offsets[1] > file_size
        ):
            raise WeightsHeaderError(f"tensor {name!r}: bad data_offsets")
        tensors.append(TensorEntry(name, dtype, tuple(shape), base + offsets[0], base + offsets[1]))
    return tensors


def _npy(head: bytes, file_size: int, name: str) -> list[TensorEntry] | HeaderNeed:
    if len(head) < 10:
        if file_size < 10:
            raise WeightsHeaderError("shorter than a .npy header")
        return HeaderNeed(12)
    if not head.startswith(_NPY_MAGIC):
        raise WeightsHeaderError("no .npy magic")
    major = head[6]
    if major == 1:
        (length,), start = struct.unpack_from("<H", head, 8), 10
    elif major in (2, 3):
        if len(head) < 12:
            return HeaderNeed(12)
        (length,), start = struct.unpack_from("<I", head, 8), 12
    else:
        raise WeightsHeaderError(f".npy version {major} is unknown")
    if length > MAX_HEADER_BYTES or start + length > file_size:
        raise WeightsHeaderError(f".npy header length {length} does not fit the file")
    if len(head) < start + length:
        return HeaderNeed(start + length)
    try:
        text = head[start : start + length].decode("utf-8" if major == 3 else "latin-1")
        header = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError) as exc:
        raise WeightsHeaderError(f".npy header is not a literal: {exc}") from exc
    if not isinstance(header, dict):
        raise WeightsHeaderError(".npy header is not a dict")
    descr, shape = header.get("descr"), header.get("shape")
    if not isinstance(descr, str) or not isinstance(shape, tuple) or not _is_shape(list(shape)):
        raise WeightsHeaderError(".npy header has no usable descr and shape")
    return [TensorEntry(name, descr, tuple(shape), start + length, file_size)]


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_shape(value: object) -> bool:
    return isinstance(value, list) and all(_is_count(d) for d in value)
