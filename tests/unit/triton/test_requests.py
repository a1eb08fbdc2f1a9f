"""v2 request bodies and headers as tritonclient sends them (registry.triton.requests)."""

from __future__ import annotations

import base64
import json

import pytest

from registry.triton.errors import TritonFormatError
from registry.triton.requests import (
    CONFIG_MEMBER,
    LoadRequest,
    parse_header_length,
    parse_index_body,
    parse_json_object,
    parse_load_body,
    parse_load_parameters,
    parse_unload_body,
)

CONFIG = {"backend": "onnxruntime", "input": [], "output": []}


def no_problem(path: str) -> str | None:
    return None


def parse(params: dict) -> LoadRequest:
    return parse_load_parameters(params, path_problem=no_problem)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize("raw", [b"", b"  \n", b"{}"])
def test_empty_bodies_are_empty_objects(raw):
    """tritonclient's index call sends no body at all."""
    assert parse_json_object(raw) == {}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{nope", "not valid JSON"),
        (b"\xff\xfe{", "not valid JSON"),
        (b"[" * 100_000, "not valid JSON"),
        (b"[1]", "must be a JSON object"),
        (b'"text"', "must be a JSON object"),
        (b"null", "must be a JSON object"),
    ],
)
def test_bodies_refused(raw, message):
    with pytest.raises(TritonFormatError, match=message):
        parse_json_object(raw)


def test_index_body():
    assert parse_index_body(b"") is False
    assert parse_index_body(b'{"ready": true}') is True
    assert parse_index_body(b'{"ready": false, "other": 1}') is False
    # Booleans are JSON booleans: no coercion of strings or numbers.
    for raw in (b'{"ready": "true"}', b'{"ready": 1}', b'{"ready": null}'):
        with pytest.raises(TritonFormatError, match='"ready" must be a boolean'):
            parse_index_body(raw)


def test_load_and_unload_bodies():
    assert parse_load_body(b"") == {}
    assert parse_load_body(b'{"parameters": null}') == {}
    assert parse_load_body(b'{"parameters": {"config": "{}"}}') == {"config": "{}"}
    for raw in (b'{"parameters": 3}', b'{"parameters": []}'):
        with pytest.raises(TritonFormatError, match='"parameters" must be a JSON object'):
            parse_load_body(raw)
    assert parse_unload_body(b"") is False
    assert parse_unload_body(b'{"parameters": {"unload_dependents": true}}') is True
    with pytest.raises(TritonFormatError, match="unload_dependents"):
        parse_unload_body(b'{"parameters": {"unload_dependents": "yes"}}')


def test_load_without_parameters_is_a_reload():
    assert parse({}) == LoadRequest(None, None, {}, None)
    assert parse({"unrelated": 1}) == LoadRequest(None, None, {}, None)


def test_load_with_config_and_files():
    text = json.dumps(CONFIG)
    request = parse(
        {
            "config": text,
            "file:1/model.onnx": b64(b"\x00onnx"),
            "file:1/vocab/words.txt": b64(b""),
        }
    )
    assert request == LoadRequest(
        CONFIG, text, {"model.onnx": b"\x00onnx", "vocab/words.txt": b""}, "1"
    )


def test_config_as_an_object_is_stored_as_sorted_json():
    request = parse({"config": {"output": [], "backend": "python"}, "file:07/m.py": b64(b"x")})
    assert request.config == {"output": [], "backend": "python"}
    assert request.config_text == json.dumps(
        {"backend": "python", "output": []}, indent=2, sort_keys=True
    )
    assert request.file_version == "7"  # leading zeros dropped


def test_a_config_alone_has_no_files():
    request = parse({"config": json.dumps(CONFIG)})
    assert request.config == CONFIG and request.files == {} and request.file_version is None


def test_paths_are_judged_as_carton_members():
    seen: list[str] = []

    def problem(path: str) -> str | None:
        seen.append(path)
        return "'..' segment" if ".." in path else None

    params = {"config": json.dumps(CONFIG), "file:1/a/b.bin": b64(b"x")}
    parse_load_parameters(params, path_problem=problem)
    assert seen == ["model/a/b.bin"]
    with pytest.raises(TritonFormatError, match=r"invalid parameter 'file:1/\.\./x': '\.\.'"):
        parse_load_parameters({**params, "file:1/../x": b64(b"x")}, path_problem=problem)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"config": "{not json", "file:1/m": "AAAA"}, 'parameter "config" is not valid JSON'),
        ({"config": "[1, 2]", "file:1/m": "AAAA"}, "must be a JSON object"),
        ({"config": 3}, 'parameter "config" must be a string'),
        ({"config": json.dumps(CONFIG), "file:1/m": "!!not base64!!"}, "not valid base64"),
        ({"config": json.dumps(CONFIG), "file:1/m": "é"}, "not valid base64"),
        ({"config": json.dumps(CONFIG), "file:1/m": 3}, "must be a base64 string"),
        ({"file:1/m": "AAAA"}, 'need a "config"'),
        ({"config": json.dumps(CONFIG), "file:1/a": "", "file:2/b": ""}, "(1, 2)"),
        ({"config": json.dumps(CONFIG), "file:model.onnx": ""}, "file:<version>/<path>"),
        ({"config": json.dumps(CONFIG), "file:x/m": ""}, "file:<version>/<path>"),
        ({"config": json.dumps(CONFIG), "file:1/": ""}, "file:<version>/<path>"),
        ({"config": json.dumps(CONFIG), "file:1/config.json": ""}, "collides"),
    ],
)
def test_load_parameters_refused(params, message):
    with pytest.raises(TritonFormatError) as e:
        parse(params)
    assert message in str(e.value)


def test_config_member_is_free_without_a_config():
    """Without a config nothing is stored at CONFIG_MEMBER, so only the missing config fails."""
    assert CONFIG_MEMBER == "model/config.json"
    with pytest.raises(TritonFormatError, match='need a "config"'):
        parse({"file:1/config.json": b64(b"{}")})


def test_header_length():
    assert parse_header_length(None) is None
    assert parse_header_length("603") == 603
    assert parse_header_length(" 0 ") == 0
    for bad in ("abc", "-1", "1.5", "", "٣"):
        with pytest.raises(TritonFormatError, match="Inference-Header-Content-Length"):
            parse_header_length(bad)
