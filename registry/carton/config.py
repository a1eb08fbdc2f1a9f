"""carton.toml: parse and validate every rule of the v1 spec.

Validation mirrors the reference loader (serde types in carton's
``carton_toml.rs``) plus the spec's prose rules, so a carton the registry
accepts is one the loader can open.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

import tomli_w

from .errors import CartonFormatError, CartonLimitExceeded
from .limits import MAX_CARTON_TOML_BYTES
from .paths import MISC_DIR, MISC_REF_PREFIX, TENSOR_INDEX, TENSOR_REF_PREFIX, path_problem

DTYPES = (
    "float32",
    "float64",
    "string",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
)

# target-lexicon accepts arch-vendor-os[-env] and a few two-part forms (wasm32-wasi).
TARGET_TRIPLE = re.compile(r"^[a-z0-9_.]+(-[a-z0-9_.]+){1,3}$")

_NUM = r"(?:0|[1-9][0-9]*)"
_PART = rf"(?:{_NUM}|[*xX])"
_IDENT = r"[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*"
_COMPARATOR = re.compile(
    rf"^(?P<op>=|>=|>|<=|<|~|\^)?\s*(?P<major>{_PART})"
    rf"(?:\.(?P<minor>{_PART})(?:\.(?P<patch>{_PART})"
    rf"(?:-(?P<pre>{_IDENT}))?(?:\+(?P<build>{_IDENT}))?)?)?$"
)
_MAX_COMPARATORS = 32


def version_req_problem(req: object) -> str | None:
    """Why ``req`` is not a Rust ``semver::VersionReq``, or None when it parses."""
    if not isinstance(req, str):
        return "must be a string"
    text = req.strip()
    if text == "":
        return "is empty"
    if text == "*":
        return None
    parts = [p.strip() for p in text.split(",")]
    if len(parts) > _MAX_COMPARATORS:
        return "has too many comparators"
    for part in parts:
        m = _COMPARATOR.fullmatch(part)
        if m is None:
            return f"comparator {part!r} is not a semver requirement"
        seq = [m["major"], m["minor"], m["patch"]]
        wild = [s is not None and s in "*xX" for s in seq]
        # Once a part is a wildcard every later part must be a wildcard or absent.
        for i in range(1, 3):
            if wild[i - 1] and seq[i] is not None and not wild[i]:
                return f"comparator {part!r}: a wildcard must be followed by wildcards"
        if m["pre"] is not None and any(wild):
            return f"comparator {part!r}: a wildcard version cannot have a pre-release"
        if wild[0] and (m["op"] is not None or len(parts) > 1):
            return f"comparator {part!r}: a bare wildcard must be the only comparator"
    return None


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str
    shape: str | tuple[int | str, ...]
    description: str | None = None
    internal_name: str | None = None


@dataclass(frozen=True)
class SelfTest:
    name: str | None
    description: str | None
    inputs: dict[str, str]
    expected_out: dict[str, str] | None


@dataclass(frozen=True)
class Example:
    name: str | None
    description: str | None
    inputs: dict[str, str]
    sample_out: dict[str, str]


@dataclass(frozen=True)
class RunnerInfo:
    runner_name: str
    required_framework_version: str
    runner_compat_version: int | None
    opts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CartonConfig:
    spec_version: int
    model_name: str | None
    short_description: str | None
    model_description: str | None
    required_platforms: tuple[str, ...]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    self_tests: tuple[SelfTest, ...]
    examples: tuple[Example, ...]
    runner: RunnerInfo
    raw: dict[str, Any] = field(compare=False, repr=False)


def _err(msg: str) -> CartonFormatError:
    return CartonFormatError(f"carton.toml: {msg}")


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _opt_str(d: dict[str, Any], key: str, where: str) -> str | None:
    v = d.get(key)
    if v is not None and not isinstance(v, str):
        raise _err(f"{where}{key} must be a string")
    return v


def _tensor_spec(d: object, where: str) -> TensorSpec:
    if not isinstance(d, dict):
        raise _err(f"{where} must be a table")
    name = d.get("name")
    if not isinstance(name, str) or name == "":
        raise _err(f"{where}.name must be a non-empty string")
    where = f"{where} {name!r}"
    dtype = d.get("dtype")
    if dtype not in DTYPES:
        raise _err(f"{where}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    if "shape" not in d:
        raise _err(f"{where}: shape is required")
    raw_shape = d["shape"]
    shape: str | tuple[int | str, ...]
    if isinstance(raw_shape, str):
        if raw_shape == "":
            raise _err(f"{where}: shape symbol must not be empty")
        shape = raw_shape
    elif isinstance(raw_shape, list):
        dims: list[int | str] = []
        for dim in raw_shape:
            if _is_int(dim):
                if dim < 0:
                    raise _err(f"{where}: shape dimension {dim} is negative")
                dims.append(dim)
            elif isinstance(dim, str) and dim != "":
                dims.append(dim)
            else:
                raise _err(f"{where}: shape dimension {dim!r} is not a symbol or an integer >= 0")
        shape = tuple(dims)
    else:
        raise _err(f"{where}: shape must be a string or a list")
    return TensorSpec(
        name=name,
        dtype=dtype,
        shape=shape,
        description=_opt_str(d, "description", f"{where}: "),
        internal_name=_opt_str(d, "internal_name", f"{where}: "),
    )


def _tensor_specs(raw: dict[str, Any], key: str) -> tuple[TensorSpec, ...]:
    lst = raw.get(key)
    if lst is None:
        return ()
    if not isinstance(lst, list):
        raise _err(f"[[{key}]] must be an array of tables")
    specs = tuple(_tensor_spec(d, f"{key}[{i}]") for i, d in enumerate(lst))
    seen: set[str] = set()
    for s in specs:
        if s.name in seen:
            raise _err(f"duplicate {key} name {s.name!r}")
        seen.add(s.name)
    return specs


def _ref_table(
    d: dict[str, Any],
    key: str,
    where: str,
    prefixes: tuple[str, ...],
    names: set[str],
    kind: str,
    required: bool,
) -> dict[str, str] | None:
    tbl = d.get(key)
    if tbl is None:
        if required:
            raise _err(f"{where}: {key} is required")
        return None
    if not isinstance(tbl, dict):
        raise _err(f"{where}: {key} must be a table")
    out: dict[str, str] = {}
    for name, ref in tbl.items():
        if not isinstance(ref, str) or not any(
            ref.startswith(p) and len(ref) > len(p) for p in prefixes
        ):
            allowed = " or ".join(repr(p) for p in prefixes)
            raise _err(f"{where}: {key}.{name} = {ref!r} must be a string starting with {allowed}")
        if name not in names:
            raise _err(f"{where}: {key}.{name} does not name a declared {kind}")
        out[name] = ref
    return out


def _section_list(raw: dict[str, Any], key: str) -> list[dict[str, Any]]:
    lst = raw.get(key)
    if lst is None:
        return []
    if not isinstance(lst, list) or not all(isinstance(d, dict) for d in lst):
        raise _err(f"[[{key}]] must be an array of tables")
    return lst


# A self test or example: name, description, inputs, outputs.
_Case = tuple[str | None, str | None, dict[str, str], dict[str, str] | None]

# [[self_test]] and [[example]]: the plural their errors use, the prefixes their
# references may take, the key of their outputs and whether it is required.
_CASE_SECTIONS: dict[str, tuple[str, tuple[str, ...], str, bool]] = {
    "self_test": ("self tests", (TENSOR_REF_PREFIX,), "expected_out", False),
    "example": ("examples", (TENSOR_REF_PREFIX, MISC_REF_PREFIX), "sample_out", True),
}


def _cases(
    raw: dict[str, Any], section: str, in_names: set[str], out_names: set[str]
) -> list[_Case]:
    """(name, description, inputs, outputs) of each table of ``section``, checked."""
    label, prefixes, outputs_key, outputs_required = _CASE_SECTIONS[section]
    cases: list[_Case] = []
    for i, d in enumerate(_section_list(raw, section)):
        where = f"{section}[{i}]"
        if not in_names and not out_names:
            raise _err(f"{where}: {label} need inputs and outputs declared")
        ins = _ref_table(d, "inputs", where, prefixes, in_names, "input", True)
        outs = _ref_table(d, outputs_key, where, prefixes, out_names, "output", outputs_required)
        assert ins is not None
        name = _opt_str(d, "name", f"{where}: ")
        cases.append((name, _opt_str(d, "description", f"{where}: "), ins, outs))
    return cases


def parse_carton_toml(data: bytes | str) -> CartonConfig:
    """Parse carton.toml; raise CartonFormatError naming the first broken rule."""
    if isinstance(data, bytes | bytearray | memoryview):
        if len(data) > MAX_CARTON_TOML_BYTES:
            raise CartonLimitExceeded(f"carton.toml is larger than {MAX_CARTON_TOML_BYTES} bytes")
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise _err("not valid UTF-8") from None
    else:
        text = data
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _err(f"not valid TOML: {e}") from None

    spec_version = raw.get("spec_version")
    if spec_version is None:
        raise _err("spec_version is required")
    if not _is_int(spec_version):
        raise _err(f"spec_version must be an integer, got {spec_version!r}")
    if spec_version != 1:
        raise _err(f"unsupported spec_version {spec_version} (this registry reads version 1)")

    model_name = _opt_str(raw, "model_name", "")
    short_description = _opt_str(raw, "short_description", "")
    model_description = _opt_str(raw, "model_description", "")
    for key in ("license", "repository", "homepage"):
        _opt_str(raw, key, "")

    platforms = raw.get("required_platforms", [])
    if not isinstance(platforms, list):
        raise _err("required_platforms must be a list of target triples")
    for p in platforms:
        if not isinstance(p, str) or not TARGET_TRIPLE.fullmatch(p):
            raise _err(f"required_platforms: {p!r} is not a valid target triple")

    inputs = _tensor_specs(raw, "input")
    outputs = _tensor_specs(raw, "output")
    in_names = {s.name for s in inputs}
    out_names = {s.name for s in outputs}

    self_tests = [SelfTest(*case) for case in _cases(raw, "self_test", in_names, out_names)]
    examples: list[Example] = []
    for name, description, ins, outs in _cases(raw, "example", in_names, out_names):
        assert outs is not None  # sample_out is required: _cases raised without it
        examples.append(Example(name, description, ins, outs))

    runner = raw.get("runner")
    if not isinstance(runner, dict):
        raise _err("[runner] table is required")
    runner_name = runner.get("runner_name")
    if not isinstance(runner_name, str) or runner_name == "":
        raise _err("runner.runner_name is required (a non-empty string)")
    rfv = runner.get("required_framework_version")
    if rfv is None:
        raise _err("runner.required_framework_version is required")
    problem = version_req_problem(rfv)
    if problem is not None:
        raise _err(f"runner.required_framework_version {rfv!r} {problem}")
    compat = runner.get("runner_compat_version")
    if compat is not None and (not _is_int(compat) or not 0 <= compat <= 2**31 - 1):
        raise _err("runner.runner_compat_version must be an integer from 0 to 2147483647")
    opts = runner.get("opts", {})
    if not isinstance(opts, dict):
        raise _err("runner.opts must be a table")
    for k, v in opts.items():
        if not isinstance(v, str | int | float | bool):
            raise _err(f"runner.opts.{k} must be a string, integer, float or boolean")

    return CartonConfig(
        spec_version=spec_version,
        model_name=model_name,
        short_description=short_description,
        model_description=model_description,
        required_platforms=tuple(platforms),
        inputs=inputs,
        outputs=outputs,
        self_tests=tuple(self_tests),
        examples=tuple(examples),
        runner=RunnerInfo(runner_name, rfv, compat, dict(opts)),
        raw=raw,
    )


def iter_references(config: CartonConfig) -> list[tuple[str, str]]:
    """Every (where, reference) of self tests and examples, in file order."""
    out: list[tuple[str, str]] = []
    for i, t in enumerate(config.self_tests):
        for key, tbl in (("inputs", t.inputs), ("expected_out", t.expected_out or {})):
            out.extend((f"self_test[{i}].{key}.{n}", r) for n, r in tbl.items())
    for i, e in enumerate(config.examples):
        for key, tbl in (("inputs", e.inputs), ("sample_out", e.sample_out)):
            out.extend((f"example[{i}].{key}.{n}", r) for n, r in tbl.items())
    return out


def validate_references(
    config: CartonConfig, tensor_names: set[str], file_paths: set[str]
) -> list[str]:
    """Problems with ``@tensor_data/NAME`` (index.toml names) and ``@misc/PATH`` refs."""
    problems: list[str] = []
    for where, ref in iter_references(config):
        if ref.startswith(TENSOR_REF_PREFIX):
            name = ref[len(TENSOR_REF_PREFIX) :]
            if name not in tensor_names:
                problems.append(f"{where}: {ref} names no tensor in {TENSOR_INDEX}")
        elif ref.startswith(MISC_REF_PREFIX):
            path = MISC_DIR + ref[len(MISC_REF_PREFIX) :]
            bad = path_problem(path)
            if bad is not None:
                problems.append(f"{where}: {ref}: {bad}")
            elif path not in file_paths:
                problems.append(f"{where}: {ref}: {path} is not in MANIFEST")
        else:  # parse_carton_toml already rejects these
            problems.append(
                f"{where}: {ref} is not a {TENSOR_REF_PREFIX} or {MISC_REF_PREFIX} reference"
            )
    return problems


def render_carton_toml(doc: dict[str, Any]) -> bytes:
    """TOML bytes for ``doc``, validated by parsing them back (never emit a bad carton)."""
    out = tomli_w.dumps(doc).encode("utf-8")
    parse_carton_toml(out)
    return out
