"""The real tritonclient (sync and aio) against a live registry on every backend pair."""

from __future__ import annotations

import base64
import hashlib
import json

import httpx
import pytest
from tritonclient.utils import InferenceServerException

from registry import __version__
from tests.conftest import fixture_carton
from tests.integration.v2.conftest import counts, push, read_carton, run_aio

ONNX = b"\x08\x07\x12\x07pytorch" + bytes(range(256)) * 4  # any bytes will do
EXTRA = b"vocabulary\n" * 10

CONFIG = {
    "name": "ignored-the-url-wins",
    "backend": "onnxruntime",
    "max_batch_size": 8,
    "input": [
        {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1, 3]},
        {"name": "TOKENS", "data_type": "TYPE_STRING", "dims": ["1"]},
    ],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT64", "dims": [2]}],
    "instance_group": [{"kind": "KIND_CPU", "count": 1}],
}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def model_versions(live_server, name: str) -> list[dict]:
    r = httpx.get(f"{live_server.url}/api/v1/models/{name}")
    assert r.status_code == 200, r.text
    return r.json()["versions"]


def test_server_metadata_and_health(live_server, triton):
    meta = triton.get_server_metadata()
    assert meta["name"] == "carton-registry"
    assert meta["version"] == __version__
    assert {"model_repository", "binary_tensor_data"} <= set(meta["extensions"])
    assert triton.is_server_live() and triton.is_server_ready()

    async def aio(c):
        return await c.get_server_metadata(), await c.is_server_live(), await c.is_server_ready()

    ameta, live, ready = run_aio(live_server, aio)
    assert ameta == meta and live and ready

    raw = httpx.get(live_server.url + "/v2/health/ready")
    assert raw.status_code == 200
    assert (
        "content-encoding"
        not in httpx.get(live_server.url + "/v2", headers={"Accept-Encoding": "identity"}).headers
    )


def test_repository_index(live_server, triton):
    assert triton.get_model_repository_index() == []  # sync client: empty body
    push(live_server, fixture_carton("02"))
    push(live_server, fixture_carton("03"))
    expected = [
        {"name": "misc_and_strings", "version": "1", "state": "READY", "reason": ""},
        {"name": "selftest_identity", "version": "1", "state": "READY", "reason": ""},
    ]
    assert triton.get_model_repository_index() == expected
    assert run_aio(live_server, lambda c: c.get_model_repository_index()) == expected
    for body in (b"", b"{}", b'{"ready": true}', b'{"ready": false}'):
        r = httpx.post(live_server.url + "/v2/repository/index", content=body)
        assert r.status_code == 200 and r.json() == expected, (body, r.text)
    r = httpx.post(live_server.url + "/v2/repository/index", content=b"{nope")
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]


def test_load_with_config_and_files_then_pull(live_server, triton):
    config = json.dumps(CONFIG)
    triton.load_model(
        "detector",
        config=config,
        files={"file:1/model.onnx": ONNX, "file:1/vocab/words.txt": EXTRA},
    )
    [version] = model_versions(live_server, "detector")
    assert version["version"] == 1 and version["state"] == "READY"
    manifest = version["manifest_sha256"]

    carton = httpx.get(f"{live_server.url}/api/v1/cartons/{manifest}").json()
    files = {f["path"]: f["sha256"] for f in carton["files"]}
    assert files["model/model.onnx"] == sha(ONNX)
    assert files["model/vocab/words.txt"] == sha(EXTRA)
    assert files["model/config.json"] == sha(config.encode())
    assert set(files) == {
        "carton.toml",
        "tensor_data/index.toml",
        "model/config.json",
        "model/model.onnx",
        "model/vocab/words.txt",
    }
    assert carton["model_name"] == "detector"
    assert carton["runner"]["runner_name"] == "onnxruntime"
    assert carton["runner"]["required_framework_version"] == "*"
    assert carton["inputs"] == [
        {
            "name": "INPUT0",
            "dtype": "float32",
            "shape": ["batch_size", "*", 3],
            "description": None,
        },
        {"name": "TOKENS", "dtype": "string", "shape": ["batch_size", 1], "description": None},
    ]
    assert carton["outputs"][0]["dtype"] == "int64"

    full = httpx.get(f"{live_server.url}/cartons/{manifest}.carton", params={"form": "full"})
    assert full.status_code == 200, full.text
    members = read_carton(full.content)
    assert sha(members["model/model.onnx"]) == sha(ONNX)
    assert sha(members["model/vocab/words.txt"]) == sha(EXTRA)
    assert members["model/config.json"] == config.encode()

    index = triton.get_model_repository_index()
    assert index == [{"name": "detector", "version": "1", "state": "READY", "reason": ""}]

    meta = triton.get_model_metadata("detector")
    assert meta == {
        "name": "detector",
        "versions": ["1"],
        "platform": "onnxruntime",
        "inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [-1, -1, 3]},
            {"name": "TOKENS", "datatype": "BYTES", "shape": [-1, 1]},
        ],
        "outputs": [{"name": "OUTPUT0", "datatype": "INT64", "shape": [-1, 2]}],
    }
    assert triton.get_model_metadata("detector", "1") == meta
    cfg = triton.get_model_config("detector")
    assert cfg == triton.get_model_config("detector", "1")
    assert cfg["name"] == "detector" and cfg["backend"] == "onnxruntime"
    # The config reads back as it was loaded: max_batch_size 8, dims without the batch dim.
    assert cfg["max_batch_size"] == 8
    assert cfg["input"][0] == {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1, 3]}
    assert cfg["input"][1] == {"name": "TOKENS", "data_type": "TYPE_STRING", "dims": [1]}
    assert cfg["output"] == [{"name": "OUTPUT0", "data_type": "TYPE_INT64", "dims": [2]}]
    assert triton.is_model_ready("detector") and triton.is_model_ready("detector", "1")

    # Loading the same bytes again is idempotent (same manifest, same version).
    before = counts(live_server.ctx)
    triton.load_model(
        "detector",
        config=config,
        files={"file:1/model.onnx": ONNX, "file:1/vocab/words.txt": EXTRA},
    )
    assert counts(live_server.ctx) == before
    # New bytes: a new version; the metadata lists both.
    triton.load_model("detector", config=config, files={"file:2/model.onnx": ONNX + b"v2"})
    assert [v["version"] for v in model_versions(live_server, "detector")] == [2, 1]
    assert triton.get_model_metadata("detector", "1")["versions"] == ["1", "2"]
    assert triton.is_model_ready("detector", "2")
    with pytest.raises(InferenceServerException) as e:
        triton.get_model_metadata("detector", "3")
    assert e.value.status() == "404" and "no version 3" in e.value.message()


def test_aio_load_metadata_unload(live_server):
    config = json.dumps(
        {
            "backend": "python",
            "input": [{"name": "x", "datatype": "FP64", "shape": [2, -1]}],
            "output": [{"name": "y", "datatype": "UINT8", "shape": [4]}],
        }
    )

    async def scenario(c):
        await c.load_model("aio_model", config=config, files={"file:3/model.py": b"print(1)\n"})
        meta = await c.get_model_metadata("aio_model")
        cfg = await c.get_model_config("aio_model", "1")
        ready = await c.is_model_ready("aio_model")
        await c.unload_model("aio_model", unload_dependents=True)
        index = await c.get_model_repository_index()
        not_ready = await c.is_model_ready("aio_model")
        await c.load_model("aio_model")
        index2 = await c.get_model_repository_index()
        return meta, cfg, ready, index, not_ready, index2

    meta, cfg, ready, index, not_ready, index2 = run_aio(live_server, scenario)
    assert meta["platform"] == "python"
    assert meta["inputs"] == [{"name": "x", "datatype": "FP64", "shape": [2, -1]}]
    assert meta["outputs"] == [{"name": "y", "datatype": "UINT8", "shape": [4]}]
    assert cfg["backend"] == "python" and cfg["input"][0]["data_type"] == "TYPE_FP64"
    assert ready and not not_ready
    assert index == [
        {"name": "aio_model", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"}
    ]
    assert index2 == [{"name": "aio_model", "version": "1", "state": "READY", "reason": ""}]


def test_unload_then_load_without_files(live_server, triton):
    push(live_server, fixture_carton("02"))
    before = counts(live_server.ctx)
    triton.unload_model("selftest_identity")
    assert triton.get_model_repository_index() == [
        {"name": "selftest_identity", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"}
    ]
    ready_only = httpx.post(live_server.url + "/v2/repository/index", content=b'{"ready": true}')
    assert ready_only.json() == []
    assert not triton.is_model_ready("selftest_identity")
    r = httpx.get(live_server.url + "/v2/models/selftest_identity/ready")
    assert r.status_code == 400 and "unloaded" in r.json()["error"]
    assert counts(live_server.ctx) == before  # nothing deleted
    # Still pullable while unloaded.
    manifest = model_versions(live_server, "selftest_identity")[0]["manifest_sha256"]
    assert httpx.get(f"{live_server.url}/api/v1/cartons/{manifest}").status_code == 200

    triton.load_model("selftest_identity")
    assert triton.get_model_repository_index()[0]["state"] == "READY"
    assert triton.is_model_ready("selftest_identity")
    for body in (b"", b"{}", b'{"parameters": {}}'):
        r = httpx.post(
            live_server.url + "/v2/repository/models/selftest_identity/load", content=body
        )
        assert r.status_code == 200, r.text
        r = httpx.post(
            live_server.url + "/v2/repository/models/selftest_identity/unload", content=body
        )
        assert r.status_code == 200, r.text


def test_load_without_files_reports_a_missing_blob(live_server, triton):
    push(live_server, fixture_carton("02"))
    manifest = model_versions(live_server, "selftest_identity")[0]["manifest_sha256"]
    files = httpx.get(f"{live_server.url}/api/v1/cartons/{manifest}").json()["files"]
    victim = next(f for f in files if f["path"] == "model/sub/dir/weights.bin")
    live_server.ctx.blobs.delete(victim["sha256"])
    with pytest.raises(InferenceServerException) as e:
        triton.load_model("selftest_identity")
    assert e.value.status() == "400"
    assert victim["sha256"] in e.value.message()
    [entry] = triton.get_model_repository_index()
    assert entry["state"] == "UNAVAILABLE"
    assert victim["sha256"] in entry["reason"] and "weights.bin" in entry["reason"]
    assert not triton.is_model_ready("selftest_identity")


def test_errors_surface_with_the_servers_message(live_server, triton):
    with pytest.raises(InferenceServerException) as e:
        triton.get_model_metadata("nope")
    assert e.value.status() == "404" and "no model named 'nope'" in e.value.message()
    with pytest.raises(InferenceServerException) as e:
        triton.get_model_config("nope", "1")
    assert e.value.status() == "404"
    with pytest.raises(InferenceServerException) as e:
        triton.load_model("nope")
    assert e.value.status() == "404"
    with pytest.raises(InferenceServerException) as e:
        triton.unload_model("nope")
    assert e.value.status() == "404"
    assert not triton.is_model_ready("nope")

    async def aio(c):
        with pytest.raises(InferenceServerException) as e:
            await c.get_model_metadata("nope")
        return e.value

    err = run_aio(live_server, aio)
    assert err.status() == "404" and "no model named 'nope'" in err.message()
    with pytest.raises(InferenceServerException) as e:
        triton.get_model_metadata("x", "one")
    assert e.value.status() == "400" and "invalid model version" in e.value.message()


BAD_LOADS = [
    ({"config": "{not json", "file:1/model.onnx": "AAAA"}, "not valid JSON"),
    ({"config": "[1, 2]", "file:1/model.onnx": "AAAA"}, "must be a JSON object"),
    ({"config": json.dumps(CONFIG), "file:1/model.onnx": "!!not base64!!"}, "not valid base64"),
    ({"file:1/model.onnx": "AAAA"}, 'need a "config"'),
    (
        {"config": json.dumps(CONFIG), "file:1/a.onnx": "AAAA", "file:2/b.onnx": "AAAA"},
        "more than one version",
    ),
    ({"config": json.dumps(CONFIG), "file:1/../evil": "AAAA"}, ".."),
    ({"config": json.dumps(CONFIG), "file:model.onnx": "AAAA"}, "file:<version>/<path>"),
    (
        {
            "config": json.dumps(
                {**CONFIG, "input": [{"name": "b", "data_type": "TYPE_BOOL", "dims": [1]}]}
            ),
            "file:1/model.onnx": "AAAA",
        },
        "BOOL",
    ),
    (
        {
            "config": json.dumps(
                {**CONFIG, "output": [{"name": "h", "datatype": "FP16", "shape": [1]}]}
            ),
            "file:1/model.onnx": "AAAA",
        },
        "FP16",
    ),
    (
        {
            "config": json.dumps(
                {**CONFIG, "input": [{"name": "h", "data_type": "TYPE_BF16", "dims": [1]}]}
            ),
            "file:1/model.onnx": "AAAA",
        },
        "BF16",
    ),
    (
        {
            "config": json.dumps(
                {**CONFIG, "input": [{"name": "i", "data_type": "TYPE_FP32", "dims": [-7]}]}
            ),
            "file:1/model.onnx": "AAAA",
        },
        "dim",
    ),
    ({"config": json.dumps({"input": []}), "file:1/weights": "AAAA"}, "backend"),
    ({"config": json.dumps(CONFIG), "file:1/config.json": "AAAA"}, "collides"),
]


@pytest.mark.parametrize(("params", "message"), BAD_LOADS, ids=[m for _, m in BAD_LOADS])
def test_bad_loads_are_400_and_store_nothing(live_server, params, message):
    before = counts(live_server.ctx)
    r = httpx.post(
        live_server.url + "/v2/repository/models/bad/load",
        content=json.dumps({"parameters": params}),
    )
    assert r.status_code == 400, r.text
    assert message in r.json()["error"]
    assert counts(live_server.ctx) == before
    assert not list((live_server.ctx.settings.data_dir / "uploads").glob("upload-v2-*"))


def test_bad_loads_via_tritonclient(live_server, triton):
    before = counts(live_server.ctx)
    with pytest.raises(InferenceServerException) as e:
        triton.load_model("bad", config="{not json", files={"file:1/m.onnx": b"x"})
    assert e.value.status() == "400" and "not valid JSON" in e.value.message()
    bool_config = json.dumps(
        {**CONFIG, "input": [{"name": "b", "data_type": "TYPE_BOOL", "dims": [1]}]}
    )
    with pytest.raises(InferenceServerException) as e:
        triton.load_model("bad", config=bool_config, files={"file:1/m.onnx": b"x"})
    assert e.value.status() == "400" and "BOOL" in e.value.message()
    with pytest.raises(InferenceServerException) as e:
        triton.load_model("bad", files={"file:1/m.onnx": b"x"})
    assert e.value.status() == "400"
    # A new config without files is not supported (documented): 501, nothing stored.
    push(live_server, fixture_carton("02"))
    after_push = counts(live_server.ctx)
    with pytest.raises(InferenceServerException) as e:
        triton.load_model("selftest_identity", config=json.dumps(CONFIG))
    assert e.value.status() == "501" and "without model files" in e.value.message()
    assert counts(live_server.ctx) == after_push
    assert after_push["models"] == before["models"] + 1


def test_bad_json_bodies(live_server):
    for path in ("load", "unload"):
        for body in (b"{nope", b"[1]", b'{"parameters": 3}'):
            r = httpx.post(f"{live_server.url}/v2/repository/models/x/{path}", content=body)
            assert r.status_code == 400, (path, body, r.text)
            assert r.json()["error"]


@pytest.mark.settings(max_v2_body_bytes=4096)
def test_load_and_verify_body_size_limit(live_server, triton):
    """v2 bodies are parsed in memory, so they have their own small limit (not the push's)."""
    before = counts(live_server.ctx)
    with pytest.raises(InferenceServerException) as e:
        triton.load_model("big", config=json.dumps(CONFIG), files={"file:1/m.onnx": b"x" * 8192})
    assert e.value.status() == "413"
    assert counts(live_server.ctx) == before
    # verify resolves the model and self test before it reads a byte (issue 12)
    name = push(live_server, fixture_carton("02"))["model_name"]
    r = httpx.post(
        f"{live_server.url}/v2/models/{name}/self_tests/0/verify", content=b"{" + b" " * 8192 + b"}"
    )
    assert r.status_code == 413
    assert "limit" in r.json()["error"]


def test_percent_encoded_utf8_name_round_trip(live_server, triton):
    name = "modèle ünïcode"
    config = json.dumps(CONFIG)
    triton.load_model(name, config=config, files={"file:1/model.onnx": ONNX})
    assert triton.get_model_metadata(name)["name"] == name
    assert triton.get_model_config(name, "1")["name"] == name
    assert triton.get_model_repository_index()[0]["name"] == name
    assert run_aio(live_server, lambda c: c.get_model_metadata(name))["name"] == name
    manifest = model_versions(live_server, name)[0]["manifest_sha256"]
    carton = httpx.get(f"{live_server.url}/api/v1/cartons/{manifest}").json()
    assert carton["model_name"] == name
    r = httpx.get(live_server.url + "/v2/models/mod%C3%A8le%20%C3%BCn%C3%AFcode")
    assert r.status_code == 200 and r.json()["name"] == name
    # Path tricks never reach the service as a name.
    for bad in ("a%2Fb", "%2E%2E", "a%5Cb", "a%25b", "a%3Fb", "%20lead"):
        r = httpx.get(f"{live_server.url}/v2/models/{bad}")
        assert r.status_code in (400, 404), (bad, r.status_code)
        assert "error" in r.json()


def test_request_content_type_is_ignored(live_server):
    body = json.dumps(
        {
            "parameters": {
                "config": json.dumps(CONFIG),
                "file:1/model.onnx": base64.b64encode(ONNX).decode(),
            }
        }
    )
    for ctype in (None, "application/octet-stream", "text/plain", "application/json"):
        headers = {"Content-Type": ctype} if ctype else {}
        r = httpx.post(
            live_server.url + "/v2/repository/models/ct/load", content=body, headers=headers
        )
        assert r.status_code == 200, (ctype, r.text)
