"""Carton <-> Triton dtypes, shapes and configs (registry.triton.mapping): no DB, no HTTP."""

from __future__ import annotations

import re
from dataclasses import dataclass

import msgspec
import numpy as np
import pytest

from registry.triton.datatypes import TRITON_DTYPES
from registry.triton.documents import ConfigTensor, TensorMetadata
from registry.triton.errors import TensorCodecError, TritonFormatError
from registry.triton.mapping import (
    BATCH_SYMBOL,
    CARTON_TO_TRITON,
    MAX_BATCH_OPT,
    RUNNER_FOR_BACKEND,
    config_tensor,
    config_to_carton_doc,
    metadata_tensor,
    triton_shape,
    triton_to_carton_dtype,
)


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


@dataclass(frozen=True)
class Spec:
    """A carton.toml tensor as the mapping reads it (registry.carton.TensorSpec's shape)."""

    name: str
    dtype: str
    shape: str | tuple[int | str, ...]


@pytest.mark.parametrize(
    ("shape", "triton"),
    [
        ((2, 3), [2, 3]),
        (("batch_size", 3), [-1, 3]),
        (("*", "*"), [-1, -1]),
        ((), []),
        ("*", [-1]),  # any rank
        ("whole_shape_symbol", [-1]),
    ],
)
def test_carton_shapes_become_triton_shapes(shape, triton):
    assert triton_shape(shape) == triton


def test_carton_tensors_in_metadata_and_config():
    text = Spec("text", "string", ("n",))
    x = Spec("x", "float32", (2, "*"))
    assert metadata_tensor(text) == TensorMetadata("text", "BYTES", [-1])
    assert metadata_tensor(x) == TensorMetadata("x", "FP32", [2, -1])
    assert config_tensor(text) == ConfigTensor("text", "TYPE_STRING", [-1])
    assert config_tensor(x) == ConfigTensor("x", "TYPE_FP32", [2, -1])
    assert msgspec.json.decode(msgspec.json.encode(config_tensor(x))) == {
        "name": "x",
        "data_type": "TYPE_FP32",
        "dims": [2, -1],
    }


CONFIG = {
    "backend": "onnxruntime",
    "max_batch_size": 8,
    "description": "a detector",
    "input": [
        {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1, 3]},
        {"name": "TOKENS", "data_type": "TYPE_STRING", "dims": ["1"]},
    ],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT64", "dims": [2]}],
}


def test_config_becomes_carton_toml():
    assert config_to_carton_doc("det", CONFIG, ["model.onnx"]) == {
        "spec_version": 1,
        "model_name": "det",
        "short_description": "a detector",
        "input": [
            {"name": "INPUT0", "dtype": "float32", "shape": [BATCH_SYMBOL, "*", 3]},
            {"name": "TOKENS", "dtype": "string", "shape": [BATCH_SYMBOL, 1]},
        ],
        "output": [{"name": "OUTPUT0", "dtype": "int64", "shape": [BATCH_SYMBOL, 2]}],
        "runner": {
            "runner_name": "onnxruntime",
            "required_framework_version": "*",
            "opts": {MAX_BATCH_OPT: CONFIG["max_batch_size"]},  # read back by model_config
        },
    }


def test_config_in_metadata_form_without_batching():
    """``inputs``/``datatype``/``shape`` (the metadata spelling) work too; no batch symbol."""
    config = {
        "platform": "pytorch_libtorch",
        "max_batch_size": "0",
        "inputs": [{"name": "s", "datatype": "STRING", "shape": []}],
        "outputs": [{"name": "y", "datatype": "UINT8", "shape": [4, -1]}],
    }
    doc = config_to_carton_doc("m", config, [])
    assert doc["input"] == [{"name": "s", "dtype": "string", "shape": []}]
    assert doc["output"] == [{"name": "y", "dtype": "uint8", "shape": [4, "*"]}]
    assert doc["runner"]["runner_name"] == "torchscript"
    assert "short_description" not in doc
    assert "input" not in config_to_carton_doc("m", {"backend": "python"}, [])


@pytest.mark.parametrize(
    ("config", "paths", "runner"),
    [
        ({"backend": "pytorch"}, [], "torchscript"),
        ({"platform": "tensorflow_graphdef"}, [], "tensorflow"),
        ({"backend": "my_custom_backend"}, [], "my_custom_backend"),  # passes through
        ({"backend": "", "platform": "tensorrt_plan"}, [], "tensorrt"),
        ({}, ["weights.bin", "model.onnx"], "onnxruntime"),
        ({}, ["model.plan"], "tensorrt"),
        ({}, ["model.savedmodel/saved_model.pb"], "tensorflow"),
        ({}, ["model.py"], "python"),
    ],
)
def test_runner_from_backend_platform_or_file(config, paths, runner):
    assert config_to_carton_doc("m", config, paths)["runner"] == {
        "runner_name": runner,
        "required_framework_version": "*",
    }


def test_every_known_backend_names_its_runner():
    for backend, name in RUNNER_FOR_BACKEND.items():
        assert config_to_carton_doc("m", {"backend": backend}, [])["runner"]["runner_name"] == name


def _with_input(entry) -> dict:
    return {"backend": "python", "input": [entry]}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (_with_input({"name": "b", "data_type": "TYPE_BOOL", "dims": [1]}), "BOOL"),
        (_with_input({"name": "h", "datatype": "FP16", "shape": [1]}), "FP16"),
        (_with_input({"name": "h", "data_type": "TYPE_BF16", "dims": [1]}), "no carton"),
        (_with_input({"name": "i", "data_type": "TYPE_FP32", "dims": [-7]}), "dim -7"),
        (_with_input({"name": "i", "data_type": "TYPE_FP32", "dims": [1.5]}), "dim 1.5"),
        (_with_input({"name": "i", "data_type": "TYPE_FP32", "dims": [True]}), "dim True"),
        (_with_input({"name": "i", "data_type": "TYPE_FP32", "dims": 3}), "dims must be a list"),
        (_with_input({"name": "i", "data_type": "FP32", "dims": [1]}), "not a Triton TYPE_*"),
        (_with_input({"name": "i", "data_type": "TYPE_FP99", "dims": [1]}), "unknown data type"),
        (_with_input({"name": "i", "dims": [1]}), "data_type is required"),
        (_with_input({"data_type": "TYPE_FP32", "dims": [1]}), "name is required"),
        (_with_input(["i"]), "input[0] must be an object"),
        ({"backend": "python", "output": {"name": "y"}}, '"output" must be a list'),
        ({"backend": "python", "max_batch_size": -1}, "max_batch_size"),
        ({"backend": "python", "max_batch_size": True}, "max_batch_size"),
        ({"backend": 3}, '"backend" must be a string'),
        ({"input": []}, '"backend" or "platform"'),
    ],
)
def test_configs_refused(config, message):
    with pytest.raises(TritonFormatError, match=re.escape(message)):
        config_to_carton_doc("m", config, ["weights"])
