"""A self test's expected output against what a server answered, like ``numpy.allclose``.

Numbers match within ``RTOL``/``ATOL`` (NaN equals NaN); strings match exactly.  The
result names the first few differing elements, so a failed check says where.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from registry.triton.documents import ElementDiff, OutputComparison
from registry.triton.wire import WireTensor

RTOL = 1e-5
ATOL = 1e-8
_MAX_DIFFS = 5


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _scalar(value: Any) -> Any:
    """An element as JSON can carry it."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _as_bytes(value: Any) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def _diffs(mask: np.ndarray, expected: np.ndarray, actual: np.ndarray) -> list[ElementDiff]:
    out = []
    for idx in np.argwhere(mask)[:_MAX_DIFFS]:
        key = tuple(int(i) for i in idx)
        out.append(ElementDiff(list(key), _scalar(expected[key]), _scalar(actual[key])))
    return out


def _verdict(
    result: OutputComparison,
    mismatch: np.ndarray,
    expected: np.ndarray,
    actual: np.ndarray,
    how: str,
) -> OutputComparison:
    """``result`` passed, or failed with how many elements differ (``how``) and where."""
    count = int(mismatch.sum())
    result.mismatched_elements = count
    if count:
        result.reason = f"{count} of {mismatch.size} {how}"
        result.mismatches = _diffs(mismatch, expected, actual)
    else:
        result.passed = True
    return result


def compare_output(expected: WireTensor, actual: WireTensor | None) -> OutputComparison:
    """Compare one output; ``actual`` None means the response did not carry it."""
    result = OutputComparison(
        name=expected.name,
        passed=False,
        max_abs_diff=None,
        expected_shape=list(expected.shape),
        actual_shape=None if actual is None else list(actual.shape),
        datatype=expected.datatype,
    )
    if actual is None:
        result.reason = "output missing from the response"
        return result
    if actual.datatype != expected.datatype:
        result.reason = f"datatype {actual.datatype}, expected {expected.datatype}"
        return result
    if tuple(actual.shape) != tuple(expected.shape):
        result.reason = f"shape {list(actual.shape)}, expected {list(expected.shape)}"
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
        return _verdict(result, mismatch, exp_b, act_b, "string element(s) differ")
    e64 = exp.astype(np.float64)
    a64 = act.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isclose(a64, e64, rtol=RTOL, atol=ATOL, equal_nan=True)
        diff = np.abs(a64 - e64)
    both_nan = np.isnan(a64) & np.isnan(e64)
    diff = np.where(both_nan, 0.0, diff)
    if diff.size:
        result.max_abs_diff = _finite(float(np.nanmax(np.where(np.isnan(diff), np.inf, diff))))
    else:
        result.max_abs_diff = 0.0
    return _verdict(result, ~close, exp, act, f"element(s) differ beyond rtol={RTOL}, atol={ATOL}")
