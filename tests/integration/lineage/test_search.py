"""Search by what is inside: runner, framework version, and the names, dtypes and shapes of
inputs and outputs, as ``field:value`` terms in the API and on the web (both backends)."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import text

from registry.db.engine import make_engine
from registry.db.migrate import upgrade
from tests.integration.lineage.weights import carton_with

IMAGE_MODEL = b"""spec_version = 1
model_name = "vision"
short_description = "Image embeddings"
[runner]
runner_name = "torchscript"
required_framework_version = "=2.1.0"
runner_compat_version = 1
[[input]]
name = "image"
dtype = "float32"
shape = [1, 3, 224, 224]
[[output]]
name = "embedding"
dtype = "float32"
shape = [1, 512]
"""
TEXT_MODEL = b"""spec_version = 1
model_name = "classifier"
short_description = "Sentiment of a sentence"
[runner]
runner_name = "python"
required_framework_version = ">=3.10"
runner_compat_version = 1
[[input]]
name = "input ids"
dtype = "int64"
shape = ["batch", 128]
[[output]]
name = "logits"
dtype = "float32"
shape = "logits_shape"
"""


@pytest.fixture
def catalogue(client) -> None:
    for toml in (IMAGE_MODEL, TEXT_MODEL):
        r = client.post("/api/v1/cartons", content=carton_with({}, toml))
        assert r.status_code == 201, r.text


def api_names(client, q: str) -> list[str]:
    r = client.get("/api/v1/models", params={"q": q})
    assert r.status_code == 200, r.text
    return [m["name"] for m in r.json()["models"]]


@pytest.mark.parametrize(
    ("q", "names"),
    [
        ("runner:torchscript", ["vision"]),
        ("RUNNER:TorchScript", ["vision"]),
        ("runner:torch", []),  # a whole token...
        ("runner:torch*", ["vision"]),  # ...or a prefix, when asked
        ("input:float32", ["vision"]),
        ("dtype:float32", ["classifier", "vision"]),
        ("input:int64", ["classifier"]),
        ("output:logits", ["classifier"]),
        ("tensor:image", ["vision"]),
        ("tensor:input_ids", ["classifier"]),
        ("shape:1x3x224x224", ["vision"]),
        ("input:[1,3,224,224]", ["vision"]),
        ("input:batch,128", ["classifier"]),
        ("shape:logits_shape", ["classifier"]),
        ("framework:2.1.0", ["vision"]),
        ("framework:=2.1.0", ["vision"]),
        ("framework:3*", ["classifier"]),
        ("runner:python sentence", ["classifier"]),  # a field and free text
        ("runner:python image", []),
        ("runner:torchscript dtype:int64", []),
        ("embeddings", ["vision"]),  # free text as before
        ("input:", []),  # no value: a phrase, which no free text holds
        ("logits", []),  # free text is not the tokens: output:logits finds it
        ("bogus:value", []),
    ],
)
def test_field_terms_in_api_and_web(client, catalogue, q, names):
    assert api_names(client, q) == names
    page = client.get("/", params={"q": q}, headers={"Accept": "text/html"})
    assert page.status_code == 200
    assert re.findall(r'class="model-name" href="/models/([^"]+)"', page.text) == names


def test_search_follows_the_latest_version(client, catalogue):
    retrained = IMAGE_MODEL.replace(b'"torchscript"', b'"python"')
    assert client.post("/api/v1/cartons", content=carton_with({}, retrained)).status_code == 201
    assert api_names(client, "runner:torchscript") == []
    assert api_names(client, "runner:python") == ["classifier", "vision"]
    assert client.delete("/api/v1/models/vision/versions/2").status_code == 200
    assert api_names(client, "runner:torchscript") == ["vision"]


def test_migration_fills_the_tokens_of_existing_models(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'registry.db'}")
    try:
        upgrade(engine, "0004")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO cartons (manifest_sha256, manifest, carton_toml, spec_version, "
                    "model_name, runner_name, framework_version, required_platforms, file_count, "
                    "total_bytes, created_at) VALUES (:m, :raw, :toml, 1, 'vision', "
                    "'torchscript', '=2.1.0', '[]', 1, 10, CURRENT_TIMESTAMP)"
                ),
                {"m": "a" * 64, "raw": b"x", "toml": IMAGE_MODEL.decode()},
            )
            conn.execute(
                text(
                    "INSERT INTO models (id, name, last_version, latest_version, search_text, "
                    "created_at, updated_at) VALUES (1, 'vision', 1, 1, 'vision', "
                    "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO versions (model_id, version, manifest_sha256, state, "
                    "state_reason, created_at) VALUES (1, 1, :m, 'READY', '', CURRENT_TIMESTAMP)"
                ),
                {"m": "a" * 64},
            )
        upgrade(engine)
        with engine.connect() as conn:
            found = conn.execute(text("SELECT tokens FROM model_search_tokens")).scalar_one()
        assert " runner:torchscript " in found and " input:[1,3,224,224] " in found
    finally:
        engine.dispose()
