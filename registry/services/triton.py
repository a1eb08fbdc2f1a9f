"""Triton / KServe v2 verbs over the registry: framework-free and synchronous.

The HTTP layer (``registry/http/v2.py``) only parses requests and shapes responses;
everything here takes a :class:`RegistryContext` and plain Python values.

Mapping rules (user-facing; mirror them in the docs):

* carton dtypes <-> Triton datatypes: ``CARTON_TO_TRITON`` (float32<->FP32,
  string<->BYTES, ...). BOOL, FP16 and BF16 have no carton dtype: a load using
  them is refused with 400.
* carton shapes -> Triton: integer dims stay, symbols and ``"*"`` dims become
  ``-1``; a whole-shape symbol or ``shape = "*"`` (any rank) becomes ``[-1]``.
* Triton config -> carton.toml: ``-1`` dims become ``"*"``; ``max_batch_size > 0``
  prepends the shared symbol ``"batch_size"``.
* backend/platform -> ``runner_name`` (``RUNNER_FOR_BACKEND``), with
  ``required_framework_version = "*"``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import math
import re
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from registry import __version__
from registry.carton.binary_tensor import (
    CARTON_TO_TRITON,
    TRITON_DTYPES,
    TensorCodecError,
    WireTensor,
    decode_infer_body,
    encode_infer_request,
)
from registry.carton.config import (
    TENSOR_REF_PREFIX,
    CartonConfig,
    TensorSpec,
    parse_carton_toml,
    render_carton_toml,
)
from registry.carton.errors import CartonFormatError
from registry.carton.manifest import MANIFEST_NAME, build_manifest, path_problem
from registry.carton.paths import TENSOR_INDEX
from registry.carton.tensor_data import (
    NESTED,
    TensorIndexEntry,
    load_tensor,
    parse_tensor_index,
    write_tensor_index,
)
from registry.carton.zipwrite import STORED, write_zip
from registry.db.tables import Blob, Carton, CartonFile, Model, Version
from registry.errors import InvalidBody, InvalidRequest, NotFound, NotImplementedYet
from registry.services import models, references
from registry.services.context import RegistryContext
from registry.services.ingest import ingest_file
from registry.services.names import MAX_VERSION, validate_model_name
from registry.services.uploads import upload_file

SERVER_NAME = "carton-registry"
EXTENSIONS = ["model_repository", "model_repository(unload_dependents)", "binary_tensor_data"]

READY = "READY"
UNAVAILABLE = "UNAVAILABLE"
UNLOADED = "unloaded"

CONFIG_MEMBER = "model/config.json"
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

_FILE_PARAM = re.compile(r"^file:(?P<version>[0-9]+)/(?P<path>.+)$", re.DOTALL)


# --- server ---------------------------------------------------------------------------


def server_metadata() -> dict[str, Any]:
    return {"name": SERVER_NAME, "version": __version__, "extensions": list(EXTENSIONS)}


def database_ready(ctx: RegistryContext) -> bool:
    try:
        with ctx.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception:  # readiness reports, it does not raise
        return False
    return True


# --- names and references -------------------------------------------------------------


def check_name(name: str) -> str:
    """A model name from the URL (already percent-decoded by the HTTP layer)."""
    return validate_model_name(name)


def parse_version(version: str | None) -> int | None:
    if version is None:
        return None
    if (
        not version.isascii()
        or not version.isdigit()
        or len(version) > 10
        or not 1 <= int(version) <= MAX_VERSION
    ):
        raise InvalidRequest(f"invalid model version {version!r}: expected a positive integer")
    return int(version)


def _resolve(session: Session, name: str, version: int | None) -> Version:
    check_name(name)
    if version is None:
        return references.resolve_latest(session, name)
    return references.resolve_version(session, name, version)


def _version_numbers(session: Session, model_id: int) -> list[str]:
    rows = session.scalars(
        select(Version.version).where(Version.model_id == model_id).order_by(Version.version)
    )
    return [str(v) for v in rows]


def _config_of(session: Session, row: Version) -> CartonConfig:
    carton = session.get(Carton, row.manifest_sha256)
    assert carton is not None  # foreign key
    return parse_carton_toml(carton.carton_toml)


# --- repository index / unload / load (re-verify) -------------------------------------


def repository_index(ctx: RegistryContext, *, ready_only: bool = False) -> list[dict[str, str]]:
    """One entry per model version, ordered by name then version."""
    with ctx.sessions() as session:
        stmt = (
            select(Model.name, Version.version, Version.state, Version.state_reason)
            .join(Version, Version.model_id == Model.id)
            .order_by(Model.name, Version.version)
        )
        if ready_only:
            stmt = stmt.where(Version.state == READY)
        return [
            {"name": n, "version": str(v), "state": s, "reason": r or ""}
            for n, v, s, r in session.execute(stmt)
        ]


def unload_model(ctx: RegistryContext, name: str) -> dict[str, Any]:
    """Every version of ``name`` UNAVAILABLE with reason "unloaded"; nothing is deleted."""
    check_name(name)
    with ctx.transaction() as session:
        model = models.get_model_row(session, name)
        rows = list(session.scalars(select(Version).where(Version.model_id == model.id)))
        for row in rows:
            row.state = UNAVAILABLE
            row.state_reason = UNLOADED
        return {"name": name, "versions": sorted(str(r.version) for r in rows)}


def _version_problem(ctx: RegistryContext, session: Session, row: Version) -> str | None:
    """Why a version is not servable (a blob missing or of the wrong size), or None."""
    files = session.execute(
        select(CartonFile.path, CartonFile.blob_sha256, Blob.size)
        .join(Blob, Blob.sha256 == CartonFile.blob_sha256)
        .where(CartonFile.manifest_sha256 == row.manifest_sha256)
        .order_by(CartonFile.path)
    ).all()
    seen: dict[str, int | None] = {}
    for path, sha, size in files:
        if sha not in seen:
            seen[sha] = ctx.blobs.stat(sha)
        actual = seen[sha]
        if actual is None:
            return f"blob {sha} ({path}) is missing from the blob store"
        if actual != size:
            return f"blob {sha} ({path}) has {actual} bytes in the blob store, expected {size}"
    return None


def reload_model(ctx: RegistryContext, name: str) -> dict[str, Any]:
    """Load without files: re-verify every version's blobs; READY, or UNAVAILABLE + reason.

    Raises InvalidRequest (after recording the states) when any version has a problem.
    """
    check_name(name)
    with ctx.sessions() as session:
        model = models.get_model_row(session, name)
        rows = list(
            session.scalars(
                select(Version).where(Version.model_id == model.id).order_by(Version.version)
            )
        )
        problems = {r.id: _version_problem(ctx, session, r) for r in rows}
    failed: list[str] = []
    with ctx.transaction() as session:
        for version_id, problem in problems.items():
            row = session.get(Version, version_id)
            if row is None:  # deleted meanwhile
                continue
            if problem is None:
                row.state, row.state_reason = READY, ""
            else:
                row.state, row.state_reason = UNAVAILABLE, problem
                failed.append(f"version {row.version}: {problem}")
    if failed:
        raise InvalidRequest(f"failed to load {name!r}: " + "; ".join(failed))
    return {"name": name, "versions": [str(r.version) for r in rows]}


# --- load with config + files: build a carton and push it -----------------------------


@dataclass(frozen=True)
class LoadRequest:
    config: dict[str, Any] | None
    config_text: str | None
    files: dict[str, bytes]  # path under model/ -> bytes
    file_version: str | None


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """A v2 request body: empty (tritonclient sends none) or one JSON object."""
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidRequest(f"request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidRequest("request body must be a JSON object")
    return body


def parse_index_body(raw: bytes) -> bool:
    """The index request: ``{"ready": true}`` asks for READY versions only."""
    ready = parse_json_object(raw).get("ready", False)
    if not isinstance(ready, bool):
        raise InvalidRequest('"ready" must be a boolean')
    return ready


def parse_load_body(raw: bytes) -> dict[str, Any]:
    """The JSON body of load/unload: empty or an object (optionally with "parameters")."""
    params = parse_json_object(raw).get("parameters", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise InvalidRequest('"parameters" must be a JSON object')
    return params


def parse_load_parameters(params: dict[str, Any]) -> LoadRequest:
    """Validate ``config`` and ``file:<version>/<path>`` parameters (nothing stored yet)."""
    config: dict[str, Any] | None = None
    config_text: str | None = None
    if "config" in params:
        value = params["config"]
        if isinstance(value, dict):  # lenient: an object instead of its JSON text
            config, config_text = value, json.dumps(value, indent=2, sort_keys=True)
        elif isinstance(value, str):
            try:
                config = json.loads(value)
            except (ValueError, RecursionError) as exc:
                raise InvalidRequest(f'parameter "config" is not valid JSON: {exc}') from exc
            if not isinstance(config, dict):
                raise InvalidBody(
                    'parameter "config" must be a JSON object (a Triton model config)'
                )
            config_text = value
        else:
            raise InvalidRequest('parameter "config" must be a string holding a JSON model config')
    files: dict[str, bytes] = {}
    versions: set[str] = set()
    for key, value in params.items():
        if not key.startswith("file:"):
            continue
        m = _FILE_PARAM.match(key)
        if m is None:
            raise InvalidRequest(
                f"invalid parameter {key!r}: expected file:<version>/<path>, e.g. file:1/model.onnx"
            )
        versions.add(str(int(m["version"])))
        path = m["path"]
        problem = path_problem(f"model/{path}")
        if problem is not None:
            raise InvalidRequest(f"invalid parameter {key!r}: {problem}")
        if f"model/{path}" == CONFIG_MEMBER and config is not None:
            raise InvalidRequest(
                f"parameter {key!r} collides with {CONFIG_MEMBER}, where the config is stored"
            )
        if not isinstance(value, str):
            raise InvalidRequest(f"parameter {key!r} must be a base64 string")
        try:
            files[path] = base64.b64decode(value.encode("ascii"), validate=True)
        except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
            raise InvalidRequest(f"parameter {key!r} is not valid base64: {exc}") from exc
    if len(versions) > 1:
        raise InvalidRequest(
            "file parameters name more than one version "
            f"({', '.join(sorted(versions, key=int))}); load one version at a time"
        )
    if files and config is None:
        raise InvalidRequest('file parameters need a "config" parameter (the model configuration)')
    return LoadRequest(config, config_text, files, next(iter(versions), None))


def _triton_datatype(entry: dict[str, Any], where: str) -> str:
    if "data_type" in entry:
        value = entry["data_type"]
        if not isinstance(value, str) or not value.startswith("TYPE_"):
            raise InvalidRequest(f"{where}: data_type {value!r} is not a Triton TYPE_* data type")
        datatype = "BYTES" if value == "TYPE_STRING" else value[len("TYPE_") :]
    elif "datatype" in entry:
        datatype = entry["datatype"]
        if datatype == "STRING":
            datatype = "BYTES"
    else:
        raise InvalidRequest(f"{where}: data_type is required")
    if not isinstance(datatype, str) or datatype not in TRITON_DTYPES:
        raise InvalidRequest(f"{where}: unknown data type {datatype!r}")
    return datatype


_CARTON_FOR_TRITON = {v: k for k, v in CARTON_TO_TRITON.items()}


def _carton_dtype(datatype: str, where: str) -> str:
    dtype = _CARTON_FOR_TRITON.get(datatype)
    if dtype is None:
        raise InvalidRequest(
            f"{where}: data type {datatype} has no carton equivalent "
            f"(supported: {', '.join(sorted(_CARTON_FOR_TRITON))})"
        )
    return dtype


def _dim(value: Any, where: str) -> int:
    # Protobuf JSON writes int64 as strings ("dims": ["-1", "3"]).
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise InvalidRequest(f"{where}: dim {value!r} is not an integer >= -1")
    return value


def _tensor_doc(entry: Any, where: str, batched: bool) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise InvalidRequest(f"{where} must be an object")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidRequest(f"{where}: name is required")
    where = f"{where} {name!r}"
    dtype = _carton_dtype(_triton_datatype(entry, where), where)
    dims = entry.get("dims", entry.get("shape", []))
    if not isinstance(dims, list):
        raise InvalidRequest(f"{where}: dims must be a list")
    shape: list[int | str] = [BATCH_SYMBOL] if batched else []
    for d in dims:
        n = _dim(d, where)
        shape.append("*" if n == -1 else n)
    return {"name": name, "dtype": dtype, "shape": shape}


def _runner_name(config: dict[str, Any], files: dict[str, bytes]) -> str:
    for key in ("backend", "platform"):
        value = config.get(key)
        if value is not None and not isinstance(value, str):
            raise InvalidRequest(f'config "{key}" must be a string')
        if value:
            return RUNNER_FOR_BACKEND.get(value, value)
    for path in files:
        for part in path.split("/"):
            for suffix, backend in _BACKEND_BY_SUFFIX:
                if part.endswith(suffix):
                    return RUNNER_FOR_BACKEND[backend]
    raise InvalidRequest('config needs "backend" or "platform" (e.g. "onnxruntime")')


def config_to_carton_doc(name: str, config: dict[str, Any], files: dict[str, bytes]) -> dict:
    """carton.toml (as a dict) for a Triton model config."""
    mbs = config.get("max_batch_size", 0)
    if isinstance(mbs, str) and mbs.strip().isdigit():
        mbs = int(mbs)
    if isinstance(mbs, bool) or not isinstance(mbs, int) or mbs < 0:
        raise InvalidRequest(f'config "max_batch_size" must be an integer >= 0, got {mbs!r}')
    batched = mbs > 0
    doc: dict[str, Any] = {"spec_version": 1, "model_name": name}
    desc = config.get("description") or config.get("short_description")
    if isinstance(desc, str) and desc:
        doc["short_description"] = desc
    for carton_key, keys in (("input", ("input", "inputs")), ("output", ("output", "outputs"))):
        key = next((k for k in keys if k in config), None)
        entries = config.get(key, []) if key else []
        if not isinstance(entries, list):
            raise InvalidRequest(f'config "{key}" must be a list')
        specs = [_tensor_doc(e, f"{carton_key}[{i}]", batched) for i, e in enumerate(entries)]
        if specs:
            doc[carton_key] = specs
    doc["runner"] = {
        "runner_name": _runner_name(config, files),
        "required_framework_version": "*",
    }
    return doc


def build_load_carton(name: str, request: LoadRequest, out: BinaryIO) -> None:
    """Write a carton for a load request (carton.toml, MANIFEST, index.toml, model/...)."""
    assert request.config is not None and request.config_text is not None
    try:
        toml = render_carton_toml(config_to_carton_doc(name, request.config, request.files))
    except CartonFormatError as exc:
        raise InvalidRequest(f"config cannot be turned into a carton: {exc.message}") from exc
    members: dict[str, bytes] = {
        "carton.toml": toml,
        TENSOR_INDEX: write_tensor_index([]),
        CONFIG_MEMBER: request.config_text.encode("utf-8"),
    }
    for path, data in request.files.items():
        members[f"model/{path}"] = data
    try:
        manifest = build_manifest(
            (path, hashlib.sha256(data).hexdigest()) for path, data in members.items()
        )
    except CartonFormatError as exc:
        raise InvalidRequest(f"invalid file paths: {exc.message}") from exc
    ordered = [(MANIFEST_NAME, manifest.raw), *sorted(members.items())]
    write_zip(
        out,
        [(path, (lambda d=data: io.BytesIO(d)), STORED) for path, data in ordered],
    )


def load_model_with_files(ctx: RegistryContext, name: str, request: LoadRequest) -> dict:
    """Build a carton from config + files and push it through the ordinary ingest path."""
    check_name(name)
    with upload_file(ctx, prefix="upload-v2-") as (path, out):
        build_load_carton(name, request, out)
        result = ingest_file(ctx, path, model_name=name)
    # Loading is also "make it ready": a re-load of an unloaded identical carton revives it.
    if result.version is not None:
        with ctx.transaction() as session:
            row = references.resolve_version(session, name, result.version)
            row.state, row.state_reason = READY, ""
    body = result.as_json()
    body["triton_version"] = request.file_version
    return body


def load_model(ctx: RegistryContext, name: str, params: dict[str, Any]) -> dict[str, Any]:
    request = parse_load_parameters(params)
    check_name(name)
    if request.files:
        return load_model_with_files(ctx, name, request)
    if request.config is not None:
        raise NotImplementedYet(
            "loading a new config without model files is not supported: send the model's "
            'files too, as "file:<version>/<path>" parameters'
        )
    return reload_model(ctx, name)


# --- metadata and config --------------------------------------------------------------


def triton_shape(spec: TensorSpec) -> list[int]:
    if isinstance(spec.shape, str):  # a whole-shape symbol or "*": any rank
        return [-1]
    return [d if isinstance(d, int) else -1 for d in spec.shape]


def _meta_tensor(spec: TensorSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "datatype": CARTON_TO_TRITON[spec.dtype],
        "shape": triton_shape(spec),
    }


def model_metadata(ctx: RegistryContext, name: str, version: int | None) -> dict[str, Any]:
    with ctx.sessions() as session:
        row = _resolve(session, name, version)
        config = _config_of(session, row)
        return {
            "name": name,
            "versions": _version_numbers(session, row.model_id),
            "platform": config.runner.runner_name,
            "inputs": [_meta_tensor(s) for s in config.inputs],
            "outputs": [_meta_tensor(s) for s in config.outputs],
        }


def _config_tensor(spec: TensorSpec) -> dict[str, Any]:
    dtype = CARTON_TO_TRITON[spec.dtype]
    return {
        "name": spec.name,
        "data_type": "TYPE_STRING" if dtype == "BYTES" else f"TYPE_{dtype}",
        "dims": triton_shape(spec),
    }


def model_config(ctx: RegistryContext, name: str, version: int | None) -> dict[str, Any]:
    with ctx.sessions() as session:
        row = _resolve(session, name, version)
        config = _config_of(session, row)
    runner = config.runner.runner_name
    backend, platform = BACKEND_FOR_RUNNER.get(runner, (runner, None))
    out: dict[str, Any] = {"name": name}
    if platform is not None:
        out["platform"] = platform
    out["backend"] = backend
    out["version_policy"] = {"specific": {"versions": [row.version]}}
    out["max_batch_size"] = 0
    out["input"] = [_config_tensor(s) for s in config.inputs]
    out["output"] = [_config_tensor(s) for s in config.outputs]
    out["parameters"] = {
        "carton_runner_name": {"string_value": runner},
        "carton_manifest_sha256": {"string_value": row.manifest_sha256},
    }
    return out


def model_ready(ctx: RegistryContext, name: str, version: int | None) -> tuple[bool, str]:
    with ctx.sessions() as session:
        row = _resolve(session, name, version)
        return row.state == READY, row.state_reason or row.state


# --- self tests -----------------------------------------------------------------------


@dataclass
class SelfTestData:
    name: str
    version: int
    index: int
    config: CartonConfig
    inputs: list[WireTensor]
    expected: dict[str, WireTensor] | None
    output_names: list[str]


def _carton_reader(ctx: RegistryContext, session: Session, manifest_sha256: str):
    files = dict(
        session.execute(
            select(CartonFile.path, CartonFile.blob_sha256).where(
                CartonFile.manifest_sha256 == manifest_sha256
            )
        ).all()
    )

    def read(path: str) -> bytes:
        sha = files.get(path)
        if sha is None:
            raise InvalidRequest(f"carton {manifest_sha256} has no file {path!r}")
        return ctx.blobs.read_bytes(sha)

    return read


def _wire(spec: TensorSpec, value: Any, where: str) -> WireTensor:
    if isinstance(value, list):
        raise NotImplementedYet(
            f"{where}: {spec.name!r} is a nested tensor, which the Triton protocol cannot carry"
        )
    array = np.asarray(value)
    return WireTensor(spec.name, CARTON_TO_TRITON[spec.dtype], tuple(array.shape), array)


def load_self_test(
    ctx: RegistryContext, name: str, version: int | None, index: int, *, need_expected: bool
) -> SelfTestData:
    with ctx.sessions() as session:
        row = _resolve(session, name, version)
        config = _config_of(session, row)
        tests = config.self_tests
        if not 0 <= index < len(tests):
            raise NotFound(
                f"model {name!r} version {row.version} has {len(tests)} self test(s); "
                f"no self test {index}"
            )
        test = tests[index]
        if need_expected and not test.expected_out:
            raise InvalidRequest(
                f"self test {index} of {name!r} version {row.version} has no expected_out "
                "to verify against"
            )
        read = _carton_reader(ctx, session, row.manifest_sha256)
        manifest_sha256, version_number = row.manifest_sha256, row.version
    try:
        entries = {e.name: e for e in parse_tensor_index(read(TENSOR_INDEX))}
    except CartonFormatError as exc:
        raise InvalidRequest(f"carton {manifest_sha256}: {exc.message}") from exc

    def tensor(ref: str, spec: TensorSpec, where: str) -> WireTensor:
        tname = ref[len(TENSOR_REF_PREFIX) :]
        entry: TensorIndexEntry | None = entries.get(tname)
        if entry is None:
            raise InvalidRequest(f"{where}: {ref} names no tensor in {TENSOR_INDEX}")
        if entry.dtype == NESTED:
            raise NotImplementedYet(
                f"{where}: {ref} is a nested tensor, which the Triton protocol cannot carry"
            )
        try:
            value = load_tensor(entry, read, entries)
        except CartonFormatError as exc:
            raise InvalidRequest(f"{where}: {ref}: {exc.message}") from exc
        if entry.dtype != spec.dtype:
            raise InvalidRequest(
                f"{where}: {ref} has dtype {entry.dtype} but {spec.name!r} is declared {spec.dtype}"
            )
        return _wire(spec, value, where)

    inputs = [
        tensor(test.inputs[s.name], s, f"self_test[{index}].inputs")
        for s in config.inputs
        if s.name in test.inputs
    ]
    expected = None
    if need_expected:
        expected = {
            s.name: tensor((test.expected_out or {})[s.name], s, f"self_test[{index}].expected_out")
            for s in config.outputs
            if s.name in (test.expected_out or {})
        }
    return SelfTestData(
        name, version_number, index, config, inputs, expected, [s.name for s in config.outputs]
    )


def self_test_request(
    ctx: RegistryContext, name: str, version: int | None, index: int, *, binary: bool = True
) -> tuple[bytes, int | None]:
    """A ready-to-POST infer request: (body, Inference-Header-Content-Length or None)."""
    data = load_self_test(ctx, name, version, index, need_expected=False)
    try:
        return encode_infer_request(
            data.inputs, data.output_names, binary=binary, binary_outputs=binary
        )
    except TensorCodecError as exc:
        raise InvalidRequest(f"self test {index} cannot be encoded: {exc}") from exc


RTOL = 1e-5
ATOL = 1e-8
_MAX_DIFFS = 5


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _scalar(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _diffs(mask: np.ndarray, expected: np.ndarray, actual: np.ndarray) -> list[dict]:
    out = []
    for idx in np.argwhere(mask)[:_MAX_DIFFS]:
        key = tuple(int(i) for i in idx)
        out.append(
            {
                "index": list(key),
                "expected": _scalar(expected[key]),
                "actual": _scalar(actual[key]),
            }
        )
    return out


def compare_output(expected: WireTensor, actual: WireTensor | None) -> dict[str, Any]:
    result: dict[str, Any] = {
        "name": expected.name,
        "passed": False,
        "max_abs_diff": None,
        "expected_shape": list(expected.shape),
        "actual_shape": None if actual is None else list(actual.shape),
        "datatype": expected.datatype,
    }
    if actual is None:
        result["reason"] = "output missing from the response"
        return result
    if actual.datatype != expected.datatype:
        result["reason"] = f"datatype {actual.datatype}, expected {expected.datatype}"
        return result
    if tuple(actual.shape) != tuple(expected.shape):
        result["reason"] = f"shape {list(actual.shape)}, expected {list(expected.shape)}"
        return result
    exp = np.asarray(expected.data).reshape(expected.shape)
    act = np.asarray(actual.data).reshape(actual.shape)
    if expected.datatype == "BYTES":
        exp_b = np.vectorize(_as_bytes, otypes=[object])(exp) if exp.size else exp
        act_b = np.vectorize(_as_bytes, otypes=[object])(act) if act.size else act
        mismatch = (
            np.array([a != b for a, b in zip(exp_b.ravel(), act_b.ravel(), strict=True)]).reshape(
                exp.shape
            )
            if exp.size
            else np.zeros(exp.shape, dtype=bool)
        )
        count = int(mismatch.sum())
        result["mismatched_elements"] = count
        if count:
            result["reason"] = f"{count} of {exp.size} string element(s) differ"
            result["mismatches"] = _diffs(mismatch, exp_b, act_b)
        else:
            result["passed"] = True
        return result
    e64 = exp.astype(np.float64)
    a64 = act.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isclose(a64, e64, rtol=RTOL, atol=ATOL, equal_nan=True)
        diff = np.abs(a64 - e64)
    both_nan = np.isnan(a64) & np.isnan(e64)
    diff = np.where(both_nan, 0.0, diff)
    if diff.size:
        result["max_abs_diff"] = _finite(float(np.nanmax(np.where(np.isnan(diff), np.inf, diff))))
    else:
        result["max_abs_diff"] = 0.0
    mismatch = ~close
    count = int(mismatch.sum())
    result["mismatched_elements"] = count
    if count:
        result["reason"] = (
            f"{count} of {exp.size} element(s) differ beyond rtol={RTOL}, atol={ATOL}"
        )
        result["mismatches"] = _diffs(mismatch, exp, act)
    else:
        result["passed"] = True
    return result


def _as_bytes(value: Any) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def verify_self_test(
    ctx: RegistryContext,
    name: str,
    version: int | None,
    index: int,
    body: bytes,
    header_length: int | None,
) -> dict[str, Any]:
    """Compare an infer response body with the self test's expected_out (np.allclose-like)."""
    if header_length == 0:
        raise InvalidBody("Inference-Header-Content-Length 0: an infer response needs its header")
    try:
        _header, tensors = decode_infer_body(body, header_length, key="outputs")
    except TensorCodecError as exc:
        raise InvalidRequest(f"malformed infer response: {exc}") from exc
    data = load_self_test(ctx, name, version, index, need_expected=True)
    assert data.expected is not None
    actual = {t.name: t for t in tensors}
    outputs = [compare_output(exp, actual.get(n)) for n, exp in data.expected.items()]
    return {
        "model_name": name,
        "model_version": str(data.version),
        "self_test": index,
        "passed": all(o["passed"] for o in outputs),
        "outputs": outputs,
    }


def parse_header_length(value: str | None) -> int | None:
    if value is None:
        return None
    value = value.strip()
    if not value.isascii() or not value.isdigit():
        raise InvalidRequest(f"invalid Inference-Header-Content-Length {value!r}")
    return int(value)
