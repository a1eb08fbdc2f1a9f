"""Carton <-> Triton: dtypes, shapes, runners, and a Triton model config as carton.toml.

Mapping rules (user-facing; the README mirrors them):

* carton dtypes <-> Triton datatypes: ``CARTON_TO_TRITON`` (float32<->FP32,
  string<->BYTES, ...). BOOL, FP16 and BF16 have no carton dtype: a load using
  them is refused.
* carton shapes -> Triton: integer dims stay, symbols and ``"*"`` dims become
  ``-1``; a whole-shape symbol or ``shape = "*"`` (any rank) becomes ``[-1]``.
* Triton config -> carton.toml: ``-1`` dims become ``"*"``; ``max_batch_size > 0``
  prepends the shared symbol ``"batch_size"`` and is kept as ``runner.opts``
  ``triton_max_batch_size``, so the config reads back as it was loaded
  (``batched_config``: that symbol dropped again, ``max_batch_size`` restored).
* backend/platform -> ``runner_name`` (``RUNNER_FOR_BACKEND``), with
  ``required_framework_version = "*"``.

Carton tensors are read through a protocol (``CartonTensor``: name, dtype,
shape), so this module needs nothing from the carton library.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from registry.triton.datatype_names import TRITON_ELEMENT_SIZE, check_datatype
from registry.triton.documents import ConfigTensor, TensorMetadata
from registry.triton.errors import TritonFormatError

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

BATCH_SYMBOL = "batch_size"

# Triton config backend / platform -> carton runner_name. Unknown values pass through.
RUNNER_FOR_BACKEND = {
    "onnxruntime": "onnxruntime",
    "onnxruntime_onnx": "onnxruntime",
    "pytorch": "torchscript",
    "pytorch_libtorch": "torchscript",
    "libtorch": "torchscript",
    "tensorflow": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
    "tensorflow_graphdef": "tensorflow",
    "python": "python",
    "tensorrt": "tensorrt",
    "tensorrt_plan": "tensorrt",
    "openvino": "openvino",
}
# carton runner_name -> (Triton backend, Triton platform or None) for GET .../config.
BACKEND_FOR_RUNNER = {
    "onnxruntime": ("onnxruntime", "onnxruntime_onnx"),
    "torchscript": ("pytorch", "pytorch_libtorch"),
    "tensorflow": ("tensorflow", "tensorflow_savedmodel"),
    "python": ("python", None),
    "tensorrt": ("tensorrt", "tensorrt_plan"),
}
# When a config names neither backend nor platform: guess from the model file (as Triton does).
_BACKEND_BY_SUFFIX = (
    (".onnx", "onnxruntime"),
    (".pt", "pytorch"),
    (".plan", "tensorrt"),
    (".py", "python"),
    (".savedmodel", "tensorflow"),
    (".graphdef", "tensorflow"),
)


class CartonTensor(Protocol):
    """What this module reads of a carton.toml tensor (``registry.carton.TensorSpec``)."""

    @property
    def name(self) -> str: ...

    @property
    def dtype(self) -> str: ...

    @property
    def shape(self) -> str | tuple[int | str, ...]: ...


def triton_to_carton_dtype(datatype: str) -> str | None:
    """Carton dtype for a Triton datatype; None for BOOL, FP16, BF16.

    Raises TensorCodecError for a string that is not a Triton datatype.
    (BYTES maps to ``string``; the caller must check elements are UTF-8.)
    """
    check_datatype(datatype)
    return TRITON_TO_CARTON.get(datatype)


# --- carton -> Triton -----------------------------------------------------------------


def triton_shape(shape: str | tuple[int | str, ...]) -> list[int]:
    """A carton shape in Triton's terms: every dim that is not a number is ``-1``."""
    if isinstance(shape, str):  # a whole-shape symbol or "*": any rank
        return [-1]
    return [d if isinstance(d, int) else -1 for d in shape]


def metadata_tensor(spec: CartonTensor) -> TensorMetadata:
    """A tensor as model metadata lists it."""
    return TensorMetadata(spec.name, CARTON_TO_TRITON[spec.dtype], triton_shape(spec.shape))


def config_tensor(spec: CartonTensor, dims: list[int] | None = None) -> ConfigTensor:
    """A tensor as a model config lists it (``TYPE_*`` data types; strings are TYPE_STRING);
    ``dims`` when they are not its whole shape (``batched_config``)."""
    dtype = CARTON_TO_TRITON[spec.dtype]
    data_type = "TYPE_STRING" if dtype == "BYTES" else f"TYPE_{dtype}"
    return ConfigTensor(spec.name, data_type, triton_shape(spec.shape) if dims is None else dims)


# --- Triton model config -> carton.toml -----------------------------------------------


def _triton_datatype(entry: dict[str, Any], where: str) -> str:
    datatype: object
    if "data_type" in entry:
        value = entry["data_type"]
        if not isinstance(value, str) or not value.startswith("TYPE_"):
            raise TritonFormatError(
                f"{where}: data_type {value!r} is not a Triton TYPE_* data type"
            )
        datatype = "BYTES" if value == "TYPE_STRING" else value[len("TYPE_") :]
    elif "datatype" in entry:
        datatype = entry["datatype"]
        if datatype == "STRING":
            datatype = "BYTES"
    else:
        raise TritonFormatError(f"{where}: data_type is required")
    if not isinstance(datatype, str) or datatype not in TRITON_ELEMENT_SIZE:
        raise TritonFormatError(f"{where}: unknown data type {datatype!r}")
    return datatype


def _carton_dtype(datatype: str, where: str) -> str:
    dtype = TRITON_TO_CARTON.get(datatype)
    if dtype is None:
        raise TritonFormatError(
            f"{where}: data type {datatype} has no carton equivalent "
            f"(supported: {', '.join(sorted(TRITON_TO_CARTON))})"
        )
    return dtype


def _dim(value: Any, where: str) -> int:
    # Protobuf JSON writes int64 as strings ("dims": ["-1", "3"]).
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise TritonFormatError(f"{where}: dim {value!r} is not an integer >= -1")
    return value


def _tensor_doc(entry: Any, where: str, batched: bool) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise TritonFormatError(f"{where} must be an object")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise TritonFormatError(f"{where}: name is required")
    where = f"{where} {name!r}"
    dtype = _carton_dtype(_triton_datatype(entry, where), where)
    dims = entry.get("dims", entry.get("shape", []))
    if not isinstance(dims, list):
        raise TritonFormatError(f"{where}: dims must be a list")
    shape: list[int | str] = [BATCH_SYMBOL] if batched else []
    for d in dims:
        n = _dim(d, where)
        shape.append("*" if n == -1 else n)
    return {"name": name, "dtype": dtype, "shape": shape}


def _runner_name(config: dict[str, Any], paths: Iterable[str]) -> str:
    for key in ("backend", "platform"):
        value = config.get(key)
        if value is not None and not isinstance(value, str):
            raise TritonFormatError(f'config "{key}" must be a string')
        if value:
            return RUNNER_FOR_BACKEND.get(value, value)
    for path in paths:
        for part in path.split("/"):
            for suffix, backend in _BACKEND_BY_SUFFIX:
                if part.endswith(suffix):
                    return RUNNER_FOR_BACKEND[backend]
    raise TritonFormatError('config needs "backend" or "platform" (e.g. "onnxruntime")')


def config_to_carton_doc(name: str, config: dict[str, Any], paths: Iterable[str]) -> dict[str, Any]:
    """carton.toml (as a dict) for a Triton model config and the model's file paths."""
    mbs = config.get("max_batch_size", 0)
    if isinstance(mbs, str) and mbs.strip().isdigit():
        mbs = int(mbs)
    if isinstance(mbs, bool) or not isinstance(mbs, int) or mbs < 0:
        raise TritonFormatError(f'config "max_batch_size" must be an integer >= 0, got {mbs!r}')
    batched = mbs > 0
    doc: dict[str, Any] = {"spec_version": 1, "model_name": name}
    desc = config.get("description") or config.get("short_description")
    if isinstance(desc, str) and desc:
        doc["short_description"] = desc
    for carton_key, keys in (("input", ("input", "inputs")), ("output", ("output", "outputs"))):
        key = next((k for k in keys if k in config), None)
        entries = config.get(key, []) if key else []
        if not isinstance(entries, list):
            raise TritonFormatError(f'config "{key}" must be a list')
        specs = [_tensor_doc(e, f"{carton_key}[{i}]", batched) for i, e in enumerate(entries)]
        if specs:
            doc[carton_key] = specs
    doc["runner"] = {"runner_name": _runner_name(config, paths), "required_framework_version": "*"}
    if batched:
        doc["runner"]["opts"] = {MAX_BATCH_OPT: mbs}
    return doc


MAX_BATCH_OPT = "triton_max_batch_size"
"""The ``runner.opts`` key that keeps a loaded config's ``max_batch_size``."""


def batched_config(
    opts: dict[str, Any], tensors: Sequence[CartonTensor]
) -> tuple[int, list[list[int]]]:
    """``(max_batch_size, dims of each tensor)`` as Triton's config says them: a carton loaded
    from a config with ``max_batch_size > 0`` (every tensor led by ``"batch_size"``) gets it
    back, with that leading dim dropped; any other carton is ``0`` and its full shapes."""
    mbs = opts.get(MAX_BATCH_OPT)
    leads = all(not isinstance(t.shape, str) and t.shape[:1] == (BATCH_SYMBOL,) for t in tensors)
    if isinstance(mbs, int) and not isinstance(mbs, bool) and mbs > 0 and tensors and leads:
        return mbs, [triton_shape(tuple(t.shape)[1:]) for t in tensors]
    return 0, [triton_shape(t.shape) for t in tensors]
