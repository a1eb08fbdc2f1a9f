"""tensor_data/: index.toml, numeric ``.bin`` tensors and string ``.toml`` tensors.

The writers reproduce the reference packer's TOML layout (toml-rs
``to_string_pretty``) so rebuilt cartons look like the ones users push.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import CartonFormatError
from .paths import TENSOR_DIR, TENSOR_INDEX, path_problem

NESTED = "nested"

if TYPE_CHECKING:
    import numpy as np

NUMERIC_DTYPES: dict[str, str] = {
    "float32": "<f4",
    "float64": "<f8",
    "int8": "i1",
    "int16": "<i2",
    "int32": "<i4",
    "int64": "<i8",
    "uint8": "u1",
    "uint16": "<u2",
    "uint32": "<u4",
    "uint64": "<u8",
}
"""Each numeric dtype's numpy type string (little-endian). Strings, not ``np.dtype``s:
numpy (12 MiB in each server worker) is imported only where tensor values are built."""
ITEMSIZES: dict[str, int] = {name: int(code[-1]) for name, code in NUMERIC_DTYPES.items()}
_TENSOR_DTYPES = (*NUMERIC_DTYPES, "string")


@dataclass(frozen=True)
class TensorIndexEntry:
    name: str
    dtype: str
    shape: tuple[int, ...] | None
    file: str | None
    inner: tuple[str, ...] = ()

    @property
    def path(self) -> str | None:
        """Path of the tensor's file inside the carton (None for nested tensors)."""
        return None if self.file is None else TENSOR_DIR + self.file


def _toml_string(s: str) -> str:
    """A TOML string the way toml-rs pretty-prints it (literal when possible)."""
    has_ctrl = any(ord(c) < 0x20 or ord(c) == 0x7F for c in s)
    if not has_ctrl and "'" not in s:
        return f"'{s}'"
    if not has_ctrl and "'''" not in s and not s.endswith("'") and not s.startswith("'"):
        return f"'''{s}'''"
    out = ['"']
    for c in s:
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def _toml_array(items: Sequence[str]) -> str:
    """toml-rs pretty arrays: ``[]``, ``[x]``, or one item per indented line."""
    if len(items) == 0:
        return "[]"
    if len(items) == 1:
        return f"[{items[0]}]"
    return "[\n" + "".join(f"    {i},\n" for i in items) + "]"


def parse_tensor_index(raw: bytes) -> list[TensorIndexEntry]:
    """Parse tensor_data/index.toml; every entry must be loadable by the reference loader."""
    try:
        doc = tomllib.loads(bytes(raw).decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise CartonFormatError(f"{TENSOR_INDEX} is not valid TOML: {e}") from None
    tensors = doc.get("tensor")
    if not isinstance(tensors, list):
        raise CartonFormatError(f"{TENSOR_INDEX}: 'tensor' must be an array (write tensor = [])")
    out: list[TensorIndexEntry] = []
    names: set[str] = set()
    for i, t in enumerate(tensors):
        where = f"{TENSOR_INDEX} tensor[{i}]"
        if not isinstance(t, dict):
            raise CartonFormatError(f"{where} must be a table")
        name, dtype = t.get("name"), t.get("dtype")
        if not isinstance(name, str) or not name:
            raise CartonFormatError(f"{where}: name must be a non-empty string")
        where = f"{TENSOR_INDEX} tensor {name!r}"
        if name in names:
            raise CartonFormatError(f"{where}: duplicate tensor name")
        names.add(name)
        inner = t.get("inner")
        if not isinstance(inner, list) or not all(isinstance(x, str) and x for x in inner):
            raise CartonFormatError(f"{where}: inner must be a list of tensor names (inner = [])")
        if dtype == NESTED:
            out.append(TensorIndexEntry(name, dtype, None, None, tuple(inner)))
            continue
        if dtype not in _TENSOR_DTYPES:
            raise CartonFormatError(f"{where}: unknown dtype {dtype!r}")
        shape = t.get("shape")
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise CartonFormatError(f"{where}: shape must be a list of integers >= 0")
        file = t.get("file")
        if not isinstance(file, str):
            raise CartonFormatError(f"{where}: file is required")
        problem = path_problem(TENSOR_DIR + file)
        if problem is not None:
            raise CartonFormatError(f"{where}: bad file: {problem}")
        out.append(TensorIndexEntry(name, dtype, tuple(shape), file, tuple(inner)))
    for listed in out:
        for inner_name in listed.inner:
            if inner_name not in names:
                raise CartonFormatError(
                    f"{TENSOR_INDEX} tensor {listed.name!r}: "
                    f"inner tensor {inner_name!r} is not listed"
                )
    return out


def write_tensor_index(entries: Iterable[TensorIndexEntry]) -> bytes:
    """index.toml bytes as the reference packer writes them (``inner = []`` on every entry)."""
    blocks: list[str] = []
    for e in entries:
        lines = ["[[tensor]]", f"name = {_toml_string(e.name)}", f"dtype = {_toml_string(e.dtype)}"]
        if e.shape is not None:
            lines.append(f"shape = {_toml_array([str(int(d)) for d in e.shape])}")
        if e.file is not None:
            lines.append(f"file = {_toml_string(e.file)}")
        lines.append(f"inner = {_toml_array([_toml_string(n) for n in e.inner])}")
        blocks.append("\n".join(lines) + "\n")
    if not blocks:
        return b"tensor = []\n"
    return "\n".join(blocks).encode("utf-8")


def _numel(shape: Sequence[int]) -> int:
    return math.prod(int(d) for d in shape)


def decode_numeric(raw: bytes, dtype: str, shape: Sequence[int]) -> np.ndarray:
    """A numeric tensor from its little-endian C-order bytes; size must match exactly."""
    import numpy as np

    code = NUMERIC_DTYPES.get(dtype)
    if code is None:
        raise CartonFormatError(f"{dtype!r} is not a numeric tensor dtype")
    np_dtype = np.dtype(code)
    expected = _numel(shape) * np_dtype.itemsize
    if len(raw) != expected:
        raise CartonFormatError(
            f"{dtype} tensor of shape {list(shape)} needs {expected} bytes, file has {len(raw)}"
        )
    return np.frombuffer(raw, dtype=np_dtype).reshape(tuple(shape)).copy()


def dtype_name(dtype: np.dtype) -> str:
    """Carton dtype name of a numpy dtype (any byte order)."""
    for name, code in NUMERIC_DTYPES.items():
        if code[-2] == dtype.kind and ITEMSIZES[name] == dtype.itemsize:
            return name
    if dtype.kind in "OUS":
        return "string"
    raise CartonFormatError(f"numpy dtype {dtype} has no carton equivalent")


def encode_numeric(array: np.ndarray) -> bytes:
    """Little-endian, C-order bytes of a numeric array (the ``.bin`` format)."""
    import numpy as np

    arr = np.asarray(array)
    target = np.dtype(NUMERIC_DTYPES[dtype_name(arr.dtype)])
    return np.ascontiguousarray(arr, dtype=target).tobytes(order="C")


def decode_string_tensor(raw: bytes, shape: Sequence[int]) -> np.ndarray:
    """An object array of str from a ``data = [...]`` TOML file; count must match shape."""
    try:
        doc = tomllib.loads(bytes(raw).decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise CartonFormatError(f"string tensor is not valid TOML: {e}") from None
    data = doc.get("data")
    if not isinstance(data, list) or not all(isinstance(s, str) for s in data):
        raise CartonFormatError("string tensor: data must be a list of strings")
    if len(data) != _numel(shape):
        raise CartonFormatError(
            f"string tensor of shape {list(shape)} needs {_numel(shape)} strings, has {len(data)}"
        )
    import numpy as np

    out = np.empty(len(data), dtype=object)
    out[:] = data
    return out.reshape(tuple(shape))


def encode_string_tensor(values: Iterable[str] | np.ndarray) -> bytes:
    """``data = [...]`` TOML bytes (flattened C order) as the reference packer writes them."""
    import numpy as np

    flat = (
        np.asarray(values, dtype=object).ravel(order="C").tolist()
        if isinstance(values, np.ndarray)
        else list(values)
    )
    items: list[str] = []
    for v in flat:
        if isinstance(v, bytes):
            v = v.decode("utf-8")
        if not isinstance(v, str):
            raise CartonFormatError(f"string tensor element {v!r} is not a str")
        items.append(_toml_string(v))
    return f"data = {_toml_array(items)}\n".encode()


def load_tensor(
    entry: TensorIndexEntry,
    read: Callable[[str], bytes],
    index: Mapping[str, TensorIndexEntry] | None = None,
) -> np.ndarray | list[Any]:
    """Load one tensor; ``read(path_in_carton)`` returns a file's bytes.

    Nested tensors return a list of their inner tensors and need ``index``
    (name -> entry) to find them.
    """
    if entry.dtype == NESTED:
        if index is None:
            raise CartonFormatError(f"nested tensor {entry.name!r} needs the tensor index")
        out: list[Any] = []
        for name in entry.inner:
            inner = index.get(name)
            if inner is None:
                raise CartonFormatError(f"nested tensor {entry.name!r}: no inner tensor {name!r}")
            if inner.dtype == NESTED:
                raise CartonFormatError(f"nested tensor {entry.name!r} contains a nested tensor")
            out.append(load_tensor(inner, read))
        return out
    if entry.path is None or entry.shape is None:
        raise CartonFormatError(f"tensor {entry.name!r} has no file or shape")
    raw = read(entry.path)
    if entry.dtype == "string":
        return decode_string_tensor(raw, entry.shape)
    return decode_numeric(raw, entry.dtype, entry.shape)
