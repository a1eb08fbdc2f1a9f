"""A Triton config reads back as it was loaded; an infer request is told where inference runs
(issue 26 item 11)."""

from __future__ import annotations

import base64
import json

import pytest

from tests.helpers import make_carton


def load(client, name: str, config: dict) -> None:  # type: ignore[no-untyped-def]
    body = {
        "parameters": {
            "config": json.dumps(config),
            "file:1/model.onnx": base64.b64encode(b"onnx bytes").decode(),
        }
    }
    r = client.post(f"/v2/repository/models/{name}/load", json=body)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("mbs", [0, 8])
def test_max_batch_size_and_dims_read_back_as_loaded(client, mbs):
    config = {
        "backend": "onnxruntime",
        "max_batch_size": mbs,
        "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}],
        "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [-1, 2]}],
    }
    load(client, "batched", config)
    cfg = client.get("/v2/models/batched/config").json()
    assert cfg["max_batch_size"] == mbs
    assert cfg["input"] == [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}]
    assert cfg["output"] == [{"name": "y", "data_type": "TYPE_FP32", "dims": [-1, 2]}]
    meta = client.get("/v2/models/batched").json()  # metadata shapes keep the batch dim
    assert meta["inputs"][0]["shape"] == ([-1, 4] if mbs else [4])


def test_a_pushed_carton_with_a_batch_symbol_is_not_batched_in_its_config(client):
    toml = b"""spec_version = 1
model_name = 'plain'

[[input]]
name = 'x'
dtype = 'float32'
shape = ['batch_size', 4]

[runner]
runner_name = 'noop'
required_framework_version = '*'
"""
    carton = make_carton({"carton.toml": toml}, model_name=None, tensor_index=True)
    r = client.post("/api/v1/cartons", content=carton)
    assert r.status_code == 201, r.text
    cfg = client.get("/v2/models/plain/config").json()
    assert cfg["max_batch_size"] == 0 and cfg["input"][0]["dims"] == [-1, 4]


@pytest.mark.parametrize("path", ["/v2/models/m/infer", "/v2/models/m/versions/1/infer"])
def test_infer_is_a_404_that_says_where_inference_runs(client, path):
    r = client.post(path, json={"inputs": []})
    assert r.status_code == 404
    error = r.json()["error"]
    assert "not an inference server" in error and "Triton" in error
    assert "/v2/models/m/infer" in error
