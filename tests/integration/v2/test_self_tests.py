"""Self-test infer requests (decoded with tritonclient's own helpers) and the verify endpoint."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest
from tritonclient.utils import deserialize_bytes_tensor, triton_to_np_dtype

from registry.carton.config import parse_carton_toml
from registry.carton.tensor_data import load_tensor, parse_tensor_index
from registry.triton.mapping import CARTON_TO_TRITON
from registry.triton.wire import WireTensor, encode_infer_response
from tests.conftest import fixture_carton
from tests.integration.v2.conftest import make_carton, push, read_carton

FIXTURES = {"02": "selftest_identity", "03": "misc_and_strings"}


def carton_self_test(number: str, index: int = 0):
    """(inputs in [[input]] order, expected outputs) decoded by registry.carton.tensor_data."""
    members = read_carton(fixture_carton(number).read_bytes())
    config = parse_carton_toml(members["carton.toml"])
    entries = {e.name: e for e in parse_tensor_index(members["tensor_data/index.toml"])}
    test = config.self_tests[index]

    def load(ref: str):
        return load_tensor(entries[ref.removeprefix("@tensor_data/")], members.__getitem__)

    inputs = [(s, load(test.inputs[s.name])) for s in config.inputs if s.name in test.inputs]
    expected = [
        (s, load(test.expected_out[s.name]))
        for s in config.outputs
        if s.name in (test.expected_out or {})
    ]
    return config, inputs, expected


def decode_with_tritonclient(body: bytes, header_length: int) -> tuple[dict, dict]:
    """Split a binary infer request the way Triton does, decoding with tritonclient.utils."""
    header = json.loads(body[:header_length])
    offset = header_length
    tensors = {}
    for entry in header["inputs"]:
        size = entry["parameters"]["binary_data_size"]
        raw = body[offset : offset + size]
        offset += size
        if entry["datatype"] == "BYTES":
            array = deserialize_bytes_tensor(raw)
        else:
            array = np.frombuffer(raw, dtype=triton_to_np_dtype(entry["datatype"]))
        tensors[entry["name"]] = array.reshape(entry["shape"])
    assert offset == len(body)
    return header, tensors


def url(live_server, name: str, suffix: str = "", version: str | None = None) -> str:
    base = f"{live_server.url}/v2/models/{name}"
    if version is not None:
        base += f"/versions/{version}"
    return base + suffix


@pytest.mark.parametrize("number", sorted(FIXTURES))
def test_self_test_request_decodes_to_the_cartons_tensors(live_server, number):
    name = FIXTURES[number]
    push(live_server, fixture_carton(number))
    config, inputs, _ = carton_self_test(number)
    for version in (None, "1"):
        r = httpx.get(url(live_server, name, "/self_tests/0", version))
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "application/octet-stream"
        header_length = int(r.headers["inference-header-content-length"])
        header, tensors = decode_with_tritonclient(r.content, header_length)
        assert [e["name"] for e in header["inputs"]] == [s.name for s, _ in inputs]
        for spec, array in inputs:
            entry = next(e for e in header["inputs"] if e["name"] == spec.name)
            assert entry["datatype"] == CARTON_TO_TRITON[spec.dtype]
            got = tensors[spec.name]
            assert got.shape == array.shape
            if spec.dtype == "string":
                assert got.tolist() == np.vectorize(str.encode, otypes=[object])(array).tolist()
            else:
                assert got.dtype == array.dtype
                assert np.array_equal(got, array)
        assert header["outputs"] == [
            {"name": s.name, "parameters": {"binary_data": True}} for s in config.outputs
        ]

        j = httpx.get(url(live_server, name, "/self_tests/0", version), params={"format": "json"})
        assert j.status_code == 200
        assert j.headers["content-type"].startswith("application/json")
        assert "inference-header-content-length" not in j.headers
        body = j.json()
        for (spec, array), entry in zip(inputs, body["inputs"], strict=True):
            assert entry["name"] == spec.name and entry["shape"] == list(array.shape)
            assert entry["data"] == array.reshape(-1).tolist()
        assert all(o["parameters"]["binary_data"] is False for o in body["outputs"])


def expected_wire(number: str) -> list[WireTensor]:
    _, _, expected = carton_self_test(number)
    return [WireTensor(s.name, CARTON_TO_TRITON[s.dtype], a.shape, a) for s, a in expected]


def post_verify(live_server, name, body: bytes, header_length: int | None, **kw) -> httpx.Response:
    headers = {}
    if header_length is not None:
        headers["Inference-Header-Content-Length"] = str(header_length)
    return httpx.post(
        url(live_server, name, "/self_tests/0/verify", kw.get("version")),
        content=body,
        headers=headers,
    )


@pytest.mark.parametrize("number", sorted(FIXTURES))
@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_verify_passes_on_expected_outputs(live_server, number, binary):
    name = FIXTURES[number]
    push(live_server, fixture_carton(number))
    outputs = expected_wire(number)
    body, header_length = encode_infer_response(name, outputs[::-1], binary=binary)
    r = post_verify(live_server, name, body, header_length)
    assert r.status_code == 200, r.text
    result = r.json()
    assert result["passed"] is True, result
    assert [o["name"] for o in result["outputs"]] == [t.name for t in outputs]
    for o, t in zip(result["outputs"], outputs, strict=True):
        assert o["passed"] and o["expected_shape"] == list(t.shape) == o["actual_shape"]
        assert o["datatype"] == t.datatype
        if t.datatype != "BYTES":
            assert o["max_abs_diff"] == 0.0
    # A header named in any case; versioned URL.
    if header_length is not None:
        r = httpx.post(
            url(live_server, name, "/self_tests/0/verify", "1"),
            content=body,
            headers={"INFERENCE-HEADER-CONTENT-LENGTH": str(header_length)},
        )
        assert r.status_code == 200 and r.json()["passed"] is True


def test_verify_accepts_nested_json_data_and_tolerance(live_server):
    push(live_server, fixture_carton("02"))
    outputs = {t.name: t for t in expected_wire("02")}
    x = outputs["x"].data.astype(np.float64) * (1 + 1e-7)
    body = {
        "outputs": [
            {"name": "x", "datatype": "FP32", "shape": list(x.shape), "data": x.tolist()},
            {
                "name": "y",
                "datatype": "INT64",
                "shape": list(outputs["y"].shape),
                "data": outputs["y"].data.tolist(),
            },
        ]
    }
    r = post_verify(live_server, "selftest_identity", json.dumps(body).encode(), None)
    assert r.status_code == 200 and r.json()["passed"] is True, r.text


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_verify_fails_with_a_useful_diff(live_server, binary):
    push(live_server, fixture_carton("02"))
    outputs = {t.name: t for t in expected_wire("02")}
    x = outputs["x"].data.copy()
    x[1, 2] += 0.5
    altered = [WireTensor("x", "FP32", x.shape, x), outputs["y"]]
    body, header_length = encode_infer_response("selftest_identity", altered, binary=binary)
    r = post_verify(live_server, "selftest_identity", body, header_length)
    assert r.status_code == 200, r.text
    result = r.json()
    assert result["passed"] is False
    ox, oy = result["outputs"]
    assert oy["passed"] is True
    assert ox["passed"] is False
    assert ox["max_abs_diff"] == pytest.approx(0.5)
    assert ox["mismatched_elements"] == 1
    assert "1 of 6" in ox["reason"]
    [diff] = ox["mismatches"]
    assert diff["index"] == [1, 2]
    assert diff["expected"] == pytest.approx(float(outputs["x"].data[1, 2]))
    assert diff["actual"] == pytest.approx(float(x[1, 2]))

    # Missing output, wrong shape, wrong datatype.
    y = outputs["y"].data
    cases = [
        ([outputs["x"]], "y", "missing"),
        ([outputs["x"], WireTensor("y", "INT64", (4,), y.reshape(4))], "y", "shape [4]"),
        ([outputs["x"], WireTensor("y", "INT32", y.shape, y.astype(np.int32))], "y", "INT32"),
    ]
    for tensors, bad, words in cases:
        body, header_length = encode_infer_response("selftest_identity", tensors, binary=binary)
        result = post_verify(live_server, "selftest_identity", body, header_length).json()
        assert result["passed"] is False
        failed = next(o for o in result["outputs"] if o["name"] == bad)
        assert failed["passed"] is False and words in failed["reason"], failed


def test_verify_strings_exactly(live_server):
    push(live_server, fixture_carton("03"))
    [text] = expected_wire("03")
    changed = text.data.copy()
    changed[0] = changed[0] + " "
    body, header_length = encode_infer_response(
        "misc_and_strings", [WireTensor("text", "BYTES", changed.shape, changed)]
    )
    result = post_verify(live_server, "misc_and_strings", body, header_length).json()
    assert result["passed"] is False
    [out] = result["outputs"]
    assert out["mismatches"][0]["index"] == [0]
    assert out["mismatches"][0]["expected"] == text.data[0]


_HEAD = (
    b'{"outputs": [{"name": "x", "datatype": "FP32", "shape": [1], '
    b'"parameters": {"binary_data_size": 4}}]}'
)
MALFORMED = [
    (b"{nope", None, "not valid JSON"),
    (b"[1, 2]", None, "JSON object"),
    (
        b'{"outputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3], "data": [1]}]}',
        None,
        "needs 6",
    ),
    (
        b'{"outputs": [{"name": "x", "datatype": "FP99", "shape": [1], "data": [1]}]}',
        None,
        "unknown datatype",
    ),
    (
        b'{"outputs": [{"name": "x", "datatype": "FP32", "shape": [1], '
        b'"parameters": {"binary_data_size": 4}}]}',
        200,
        "outside body",
    ),
    (_HEAD + b"\x00\x00", len(_HEAD), "add up to"),
    (b"{}", 0, "header"),
]


@pytest.mark.parametrize(
    ("body", "header_length", "message"), MALFORMED, ids=[m for _, _, m in MALFORMED]
)
def test_malformed_verify_bodies_are_400(live_server, body, header_length, message):
    push(live_server, fixture_carton("02"))
    r = post_verify(live_server, "selftest_identity", body, header_length)
    assert r.status_code == 400, r.text
    assert message in r.json()["error"]


def test_self_test_errors(live_server):
    push(live_server, fixture_carton("02"))
    r = httpx.get(url(live_server, "selftest_identity", "/self_tests/1"))
    assert r.status_code == 404 and "no self test 1" in r.json()["error"]
    r = httpx.get(url(live_server, "nope", "/self_tests/0"))
    assert r.status_code == 404
    r = httpx.get(url(live_server, "selftest_identity", "/self_tests/0", "7"))
    assert r.status_code == 404
    r = httpx.get(url(live_server, "selftest_identity", "/self_tests/0"), params={"format": "x"})
    assert r.status_code == 400
    r = httpx.post(
        url(live_server, "selftest_identity", "/self_tests/0/verify"),
        content=b"{}",
        headers={"Inference-Header-Content-Length": "abc"},
    )
    assert r.status_code == 400


CUSTOM_TOML = b"""spec_version = 1
model_name = 'custom'

[[input]]
name = 'a'
dtype = 'float32'
shape = [2]

[[input]]
name = 'n'
dtype = 'float32'
shape = '*'

[[output]]
name = 'b'
dtype = 'float32'
shape = [2]

[[self_test]]
[self_test.inputs]
a = '@tensor_data/ta'

[[self_test]]
[self_test.inputs]
n = '@tensor_data/nested'

[runner]
runner_name = 'noop'
required_framework_version = '*'
"""

CUSTOM_INDEX = b"""[[tensor]]
name = 'ta'
dtype = 'float32'
shape = [2]
file = 'ta.bin'
inner = []

[[tensor]]
name = 'nested'
dtype = 'nested'
inner = ['ta']
"""


def test_no_expected_out_is_400_and_nested_is_501(live_server):
    push(
        live_server,
        make_carton(
            {
                "carton.toml": CUSTOM_TOML,
                "tensor_data/index.toml": CUSTOM_INDEX,
                "tensor_data/ta.bin": np.array([1.5, -2], dtype="<f4").tobytes(),
            }
        ),
    )
    r = httpx.get(url(live_server, "custom", "/self_tests/0"))
    assert r.status_code == 200
    _, tensors = decode_with_tritonclient(
        r.content, int(r.headers["inference-header-content-length"])
    )
    assert tensors["a"].tolist() == [1.5, -2.0]
    r = httpx.post(url(live_server, "custom", "/self_tests/0/verify"), content=b'{"outputs": []}')
    assert r.status_code == 400 and "no expected_out" in r.json()["error"]
    r = httpx.get(url(live_server, "custom", "/self_tests/1"))
    assert r.status_code == 501 and "nested" in r.json()["error"]
    meta = httpx.get(url(live_server, "custom")).json()
    assert meta["inputs"][1] == {"name": "n", "datatype": "FP32", "shape": [-1]}
