"""The one check of a carton's tensor_data, shared by ``inspect``, push and v2 load.

Callers differ only in where bytes come from (a local zip, the blob store), so
the check takes two functions: the size of a MANIFEST path's file (None when
it cannot be known without fetching, as for a linked file during ``inspect``),
and the bytes of a small file.
"""

from __future__ import annotations

from collections.abc import Callable

from .config import CartonConfig, TensorSpec
from .errors import CartonFormatError
from .manifest import Manifest
from .paths import TENSOR_INDEX, TENSOR_REF_PREFIX
from .tensor_data import (
    ITEMSIZES,
    NESTED,
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
        if e.dtype in ITEMSIZES:
            need = ITEMSIZES[e.dtype]
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


def self_test_tensor_problem(
    where: str, ref: str, entry: TensorIndexEntry, spec: TensorSpec
) -> str | None:
    """Why tensor ``entry`` (named by ``ref``) cannot be ``spec``'s value in a self test, or
    None. The one rule: ``inspect`` reports it, ``/v2/.../self_tests`` refuses with it."""
    if entry.dtype != NESTED and entry.dtype != spec.dtype:
        return f"{where}: {ref} has dtype {entry.dtype} but {spec.name!r} is declared {spec.dtype}"
    return None


def self_test_problems(config: CartonConfig, entries: dict[str, TensorIndexEntry]) -> list[str]:
    """Every self test's tensors checked against the inputs and outputs they stand for
    (refs that name no tensor are ``validate_references``' to report)."""
    problems: list[str] = []
    specs = (("inputs", config.inputs), ("expected_out", config.outputs))
    for index, test in enumerate(config.self_tests):
        for key, declared in specs:
            refs = (test.inputs if key == "inputs" else test.expected_out) or {}
            for spec in declared:
                ref = refs.get(spec.name)
                if ref is None or not ref.startswith(TENSOR_REF_PREFIX):
                    continue
                entry = entries.get(ref[len(TENSOR_REF_PREFIX) :])
                if entry is None:
                    continue
                problem = self_test_tensor_problem(f"self_test[{index}].{key}", ref, entry, spec)
                if problem is not None:
                    problems.append(problem)
    return problems
