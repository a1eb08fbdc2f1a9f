"""A carton's self tests over v2: the infer request to send, and the verdict on the answer.

A self test names its inputs and expected outputs as ``@tensor_data/...``
references; they are read from the stored carton's blobs, sent as binary (or
JSON) tensor data, and compared with a server's infer response like
``numpy.allclose``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.carton.config import TensorSpec
from registry.carton.errors import CartonFormatError
from registry.carton.paths import TENSOR_INDEX, TENSOR_REF_PREFIX
from registry.carton.tensor_data import (
    NESTED,
    TensorIndexEntry,
    load_tensor,
    parse_tensor_index,
)
from registry.carton.validate import self_test_tensor_problem
from registry.db.tables import CartonFile
from registry.errors import InvalidBody, InvalidSelfTest, NotImplementedYet, SelfTestNotFound
from registry.services.context import RegistryContext
from registry.services.stored_blobs import blob_bytes
from registry.services.triton.versions import resolve_version, stored_config
from registry.triton.compare import compare_output
from registry.triton.documents import SelfTestReport
from registry.triton.errors import TensorCodecError
from registry.triton.mapping import CARTON_TO_TRITON
from registry.triton.wire import (
    WireTensor,
    decode_infer_body,
    encode_infer_request,
    json_size_bound,
)


@dataclass
class SelfTestData:
    """A self test's tensors, read from the carton (expected outputs only when asked for)."""

    version: int
    inputs: list[WireTensor]
    expected: dict[str, WireTensor] | None
    output_names: list[str]


def _carton_reader(
    ctx: RegistryContext, session: Session, manifest_sha256: str
) -> Callable[[str], bytes]:
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
            raise InvalidSelfTest(f"carton {manifest_sha256} has no file {path!r}")
        return blob_bytes(ctx, sha)

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
    """Self test ``index`` of a stored version, its tensors read from the blob store."""
    with ctx.sessions() as session:
        row = resolve_version(session, name, version)
        config = stored_config(session, row)
        tests = config.self_tests
        if not 0 <= index < len(tests):
            raise SelfTestNotFound(
                f"model {name!r} version {row.version} has {len(tests)} self test(s); "
                f"no self test {index}"
            )
        test = tests[index]
        if need_expected and not test.expected_out:
            raise InvalidSelfTest(
                f"self test {index} of {name!r} version {row.version} has no expected_out "
                "to verify against"
            )
        read = _carton_reader(ctx, session, row.manifest_sha256)
        manifest_sha256, version_number = row.manifest_sha256, row.version
    try:
        entries = {e.name: e for e in parse_tensor_index(read(TENSOR_INDEX))}
    except CartonFormatError as exc:
        raise InvalidSelfTest(f"carton {manifest_sha256}: {exc.message}") from exc

    def tensor(ref: str, spec: TensorSpec, where: str) -> WireTensor:
        tname = ref[len(TENSOR_REF_PREFIX) :]
        entry: TensorIndexEntry | None = entries.get(tname)
        if entry is None:
            raise InvalidSelfTest(f"{where}: {ref} names no tensor in {TENSOR_INDEX}")
        if entry.dtype == NESTED:
            raise NotImplementedYet(
                f"{where}: {ref} is a nested tensor, which the Triton protocol cannot carry"
            )
        try:
            value = load_tensor(entry, read, entries)
        except CartonFormatError as exc:
            raise InvalidSelfTest(f"{where}: {ref}: {exc.message}") from exc
        problem = self_test_tensor_problem(where, ref, entry, spec)
        if problem is not None:  # the rule `inspect` reports by
            raise InvalidSelfTest(problem)
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
    return SelfTestData(version_number, inputs, expected, [s.name for s in config.outputs])


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
        raise InvalidSelfTest(f"self test {index} cannot be encoded: {exc}") from exc


# What a verify body may hold beyond the expected outputs' data: the JSON header (names,
# shapes, parameters) and any outputs the self test does not check.
VERIFY_BODY_ALLOWANCE = 1024 * 1024


@dataclass
class Verification:
    """A self test ready to check an answer against, and how big that answer may be."""

    model_name: str
    index: int
    test: SelfTestData
    max_body_bytes: int


def prepare_verification(
    ctx: RegistryContext, name: str, version: int | None, index: int
) -> Verification:
    """Resolve the model, version and self test, and read its expected outputs.

    Done before the request body is read: an unknown model costs nothing, and the body
    is bounded by what the expected outputs can need (their JSON form at its longest,
    plus ``VERIFY_BODY_ALLOWANCE``), never more than ``REGISTRY_MAX_V2_BODY_BYTES``.
    """
    data = load_self_test(ctx, name, version, index, need_expected=True)
    assert data.expected is not None
    try:
        needed = sum(json_size_bound(t) for t in data.expected.values())
    except TensorCodecError as exc:
        raise InvalidSelfTest(f"self test {index} cannot be checked: {exc}") from exc
    limit = min(needed + VERIFY_BODY_ALLOWANCE, ctx.settings.max_v2_body_bytes)
    return Verification(name, index, data, limit)


def verify_self_test(
    verification: Verification, body: bytes | bytearray, header_length: int | None
) -> SelfTestReport:
    """Compare an infer response body with the self test's expected_out (np.allclose-like)."""
    if header_length == 0:
        raise InvalidBody("Inference-Header-Content-Length 0: an infer response needs its header")
    try:
        _header, tensors = decode_infer_body(body, header_length, key="outputs")
    except TensorCodecError as exc:
        raise InvalidBody(f"malformed infer response: {exc}") from exc
    expected = verification.test.expected
    assert expected is not None
    actual = {t.name: t for t in tensors}
    outputs = [compare_output(exp, actual.get(n)) for n, exp in expected.items()]
    return SelfTestReport(
        model_name=verification.model_name,
        model_version=str(verification.test.version),
        self_test=verification.index,
        passed=all(o.passed for o in outputs),
        outputs=outputs,
    )
