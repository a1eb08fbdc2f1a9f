"""The JSON documents v2 answers with, as msgspec structs (so OpenAPI describes them).

Field order is the order on the wire; a field left ``UNSET`` is left out of the JSON,
which is how Triton's optional keys (a config's ``platform``, a passing output's
``reason``) stay absent instead of ``null``.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET, Struct, UnsetType


class ServerMetadata(Struct):
    name: str
    version: str
    extensions: list[str]


class IndexEntry(Struct):
    """One model version in the repository index."""

    name: str
    version: str
    state: str
    reason: str


class ModelVersions(Struct):
    """The versions a load (re-verify) or an unload changed."""

    name: str
    versions: list[str]


class TensorMetadata(Struct):
    name: str
    datatype: str
    shape: list[int]


class ModelMetadata(Struct):
    name: str
    versions: list[str]
    platform: str
    inputs: list[TensorMetadata]
    outputs: list[TensorMetadata]


class ConfigTensor(Struct):
    name: str
    data_type: str
    dims: list[int]


class ModelConfig(Struct, kw_only=True):
    """A Triton-style model config (its JSON form), as ``GET .../config`` answers it."""

    name: str
    platform: str | UnsetType = UNSET
    backend: str
    version_policy: dict[str, dict[str, list[int]]]
    max_batch_size: int
    input: list[ConfigTensor]
    output: list[ConfigTensor]
    parameters: dict[str, dict[str, str]]


class ElementDiff(Struct):
    """One element an output got wrong (strings as text, non-finite floats as strings)."""

    index: list[int]
    expected: Any
    actual: Any


class OutputComparison(Struct):
    """One expected output against the infer response's tensor of the same name."""

    name: str
    passed: bool
    max_abs_diff: float | None
    expected_shape: list[int]
    actual_shape: list[int] | None
    datatype: str
    mismatched_elements: int | UnsetType = UNSET
    reason: str | UnsetType = UNSET
    mismatches: list[ElementDiff] | UnsetType = UNSET


class SelfTestReport(Struct):
    """The verdict of ``POST .../self_tests/{i}/verify``: 200 whether it passed or not."""

    model_name: str
    model_version: str
    self_test: int
    passed: bool
    outputs: list[OutputComparison]
