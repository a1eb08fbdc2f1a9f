"""Self-test outputs against a server's answer (registry.triton.compare)."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest

from registry.triton.compare import ATOL, RTOL, compare_output
from registry.triton.documents import ElementDiff
from registry.triton.wire import WireTensor


def fp32(name: str, values) -> WireTensor:
    data = np.asarray(values, dtype=np.float32)
    return WireTensor(name, "FP32", data.shape, data)


def strings(name: str, values: list) -> WireTensor:
    data = np.empty(len(values), dtype=object)
    data[:] = values
    return WireTensor(name, "BYTES", data.shape, data)


def as_json(result) -> dict:
    return msgspec.json.decode(msgspec.json.encode(result))


def test_equal_outputs_pass_and_leave_reason_out():
    result = compare_output(fp32("y", [[1, 2], [3, 4]]), fp32("y", [[1, 2], [3, 4]]))
    assert as_json(result) == {
        "name": "y",
        "passed": True,
        "max_abs_diff": 0.0,
        "expected_shape": [2, 2],
        "actual_shape": [2, 2],
        "datatype": "FP32",
        "mismatched_elements": 0,
    }


def test_numbers_match_within_tolerance_like_allclose():
    expected = np.array([1.0, 1000.0, 0.0])
    close = expected + ATOL / 2 + RTOL * np.abs(expected) / 2
    assert compare_output(
        WireTensor("y", "FP64", (3,), expected), WireTensor("y", "FP64", (3,), close)
    ).passed
    nan = fp32("y", [np.nan, np.inf])
    assert compare_output(nan, fp32("y", [np.nan, np.inf])).passed


def test_mismatches_name_the_first_elements():
    expected = np.zeros((3, 3), np.float32)
    actual = expected.copy()
    actual[0, 1] = 0.5
    actual[2, :] = 1.0
    result = compare_output(fp32("y", expected), fp32("y", actual))
    assert not result.passed
    assert result.mismatched_elements == 4
    assert result.max_abs_diff == 1.0
    assert result.reason == f"4 of 9 element(s) differ beyond rtol={RTOL}, atol={ATOL}"
    assert result.mismatches == [
        ElementDiff([0, 1], 0.0, 0.5),
        ElementDiff([2, 0], 0.0, 1.0),
        ElementDiff([2, 1], 0.0, 1.0),
        ElementDiff([2, 2], 0.0, 1.0),
    ]
    many = compare_output(fp32("y", np.zeros(20)), fp32("y", np.ones(20)))
    assert many.mismatched_elements == 20 and len(many.mismatches) == 5


def test_non_finite_differences_stay_valid_json():
    result = compare_output(fp32("y", [1.0, np.nan]), fp32("y", [np.inf, 2.0]))
    body = as_json(result)
    assert body["max_abs_diff"] is None  # an infinite difference
    assert [d["actual"] for d in body["mismatches"]] == ["inf", 2.0]
    assert [d["expected"] for d in body["mismatches"]] == [1.0, "nan"]


@pytest.mark.parametrize(
    ("actual", "reason"),
    [
        (None, "output missing from the response"),
        (
            WireTensor("y", "INT32", (2,), np.array([1, 2], np.int32)),
            "datatype INT32, expected FP32",
        ),
        (fp32("y", [[1, 2]]), "shape [1, 2], expected [2]"),
    ],
)
def test_structural_failures(actual, reason):
    result = compare_output(fp32("y", [1, 2]), actual)
    assert not result.passed and result.reason == reason
    body = as_json(result)
    assert body["max_abs_diff"] is None
    assert body["actual_shape"] == (None if actual is None else list(actual.shape))
    assert "mismatched_elements" not in body and "mismatches" not in body


def test_strings_match_exactly_as_bytes():
    expected = strings("t", ["héllo", b"raw\xff", ""])
    assert compare_output(expected, strings("t", ["héllo".encode(), b"raw\xff", b""])).passed
    result = compare_output(expected, strings("t", ["héllo ", b"raw\xff", ""]))
    assert not result.passed and result.mismatched_elements == 1
    assert result.reason == "1 of 3 string element(s) differ"
    assert result.max_abs_diff is None
    assert result.mismatches == [ElementDiff([0], "héllo", "héllo ")]
    assert compare_output(strings("t", []), strings("t", [])).passed


def test_empty_numeric_outputs_pass():
    result = compare_output(fp32("y", np.zeros((0, 3))), fp32("y", np.zeros((0, 3))))
    assert result.passed and result.max_abs_diff == 0.0
