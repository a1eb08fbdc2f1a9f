"""v2 request bodies and headers as tritonclient sends them, checked.

A body is JSON whatever its Content-Type says (the sync client sends none, the aio
client ``application/octet-stream``), and an empty body is an empty object (the
index call sends none).  Parsing stays here rather than in typed Litestar ``data``
arguments because those decode leniently (``"true"`` and ``1`` pass as booleans)
and answer malformed JSON with their own messages.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from registry.triton.errors import TritonFormatError

# Where a load request's model config is kept in the carton it becomes; a file
# parameter may not take that path.
CONFIG_MEMBER = "model/config.json"

_FILE_PARAM = re.compile(r"^file:(?P<version>[0-9]+)/(?P<path>.+)$", re.DOTALL)


def parse_json_object(raw: bytes | bytearray) -> dict[str, Any]:
    """A v2 request body: empty (tritonclient sends none) or one JSON object."""
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise TritonFormatError(f"request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise TritonFormatError("request body must be a JSON object")
    return body


def _flag(body: dict[str, Any], key: str) -> bool:
    """An optional boolean member of a request body: false when absent."""
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise TritonFormatError(f'"{key}" must be a boolean')
    return value


def parse_index_body(raw: bytes | bytearray) -> bool:
    """The index request: ``{"ready": true}`` asks for READY versions only."""
    return _flag(parse_json_object(raw), "ready")


def parse_load_body(raw: bytes | bytearray) -> dict[str, Any]:
    """The JSON body of load (and unload): empty or an object, optionally with "parameters"."""
    params = parse_json_object(raw).get("parameters", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise TritonFormatError('"parameters" must be a JSON object')
    return params


def parse_unload_body(raw: bytes | bytearray) -> bool:
    """The unload request's ``unload_dependents`` (a model has no dependents here)."""
    return _flag(parse_load_body(raw), "unload_dependents")


@dataclass(frozen=True)
class LoadRequest:
    """A load's parameters, checked: a model config and the files of one version."""

    config: dict[str, Any] | None
    config_text: str | None
    files: dict[str, bytes]  # path under model/ -> bytes
    file_version: str | None


def _parse_config(value: Any) -> tuple[dict[str, Any], str]:
    """The ``config`` parameter: (the config, the text to store)."""
    if isinstance(value, dict):  # lenient: an object instead of its JSON text
        return value, json.dumps(value, indent=2, sort_keys=True)
    if not isinstance(value, str):
        raise TritonFormatError('parameter "config" must be a string holding a JSON model config')
    try:
        config = json.loads(value)
    except (ValueError, RecursionError) as exc:
        raise TritonFormatError(f'parameter "config" is not valid JSON: {exc}') from exc
    if not isinstance(config, dict):
        raise TritonFormatError('parameter "config" must be a JSON object (a Triton model config)')
    return config, value


def parse_load_parameters(
    params: dict[str, Any], *, path_problem: Callable[[str], str | None]
) -> LoadRequest:
    """Check ``config`` and ``file:<version>/<path>`` parameters (nothing stored yet).

    ``path_problem`` judges a file's path in the carton it becomes (the carton
    format's rule; this package may not import it): None when valid, else why not.
    """
    config: dict[str, Any] | None = None
    config_text: str | None = None
    if "config" in params:
        config, config_text = _parse_config(params["config"])
    files: dict[str, bytes] = {}
    versions: set[str] = set()
    for key, value in params.items():
        if not key.startswith("file:"):
            continue
        m = _FILE_PARAM.match(key)
        if m is None:
            raise TritonFormatError(
                f"invalid parameter {key!r}: expected file:<version>/<path>, e.g. file:1/model.onnx"
            )
        versions.add(str(int(m["version"])))
        path = m["path"]
        problem = path_problem(f"model/{path}")
        if problem is not None:
            raise TritonFormatError(f"invalid parameter {key!r}: {problem}")
        if f"model/{path}" == CONFIG_MEMBER and config is not None:
            raise TritonFormatError(
                f"parameter {key!r} collides with {CONFIG_MEMBER}, where the config is stored"
            )
        if not isinstance(value, str):
            raise TritonFormatError(f"parameter {key!r} must be a base64 string")
        try:
            files[path] = base64.b64decode(value.encode("ascii"), validate=True)
        except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
            raise TritonFormatError(f"parameter {key!r} is not valid base64: {exc}") from exc
    if len(versions) > 1:
        raise TritonFormatError(
            "file parameters name more than one version "
            f"({', '.join(sorted(versions, key=int))}); load one version at a time"
        )
    if files and config is None:
        raise TritonFormatError(
            'file parameters need a "config" parameter (the model configuration)'
        )
    return LoadRequest(config, config_text, files, next(iter(versions), None))


def parse_header_length(value: str | None) -> int | None:
    """``Inference-Header-Content-Length``: absent (a JSON body) or a decimal byte count."""
    if value is None:
        return None
    value = value.strip()
    if not value.isascii() or not value.isdigit() or len(value) > 19:
        raise TritonFormatError(f"invalid Inference-Header-Content-Length {value!r}")
    return int(value)
