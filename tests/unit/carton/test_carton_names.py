"""The one grammar of model names, tags and versions (DESIGN.md "Names")."""

from __future__ import annotations

import pytest

from registry.carton.names import MAX_VERSION, is_model_name, is_tag, parse_version


@pytest.mark.parametrize("name", ["resnet", "Res Net 50", "model-v2.onnx", "ünïcode", "a" * 255])
def test_model_names_that_references_can_address(name: str) -> None:
    assert is_model_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "",
        " lead",
        "trail ",
        "a@b",
        "org/model",
        "a:b",
        "a?b",
        "a#b",
        "a%b",
        "a\\b",
        "nul\x00",
        "c1\x85",
        "del\x7f",
        "tab\t",
        "\u2028",
        ".",
        "..",
        "a" * 256,
        None,
        42,
    ],
)
def test_model_names_outside_the_grammar(name: object) -> None:
    assert not is_model_name(name)


def test_tags() -> None:
    assert is_tag("v1.0_rc-2") and is_tag("9") and is_tag("x" * 128)
    for bad in ("", "-x", ".x", "a b", "a@b", "a:b", "é", "x" * 129, None):
        assert not is_tag(bad)


@pytest.mark.parametrize(
    ("text", "number"),
    [("1", 1), ("42", 42), (str(MAX_VERSION), MAX_VERSION), ("9" * 19, int("9" * 19))],
)
def test_versions_are_plain_decimal_digits(text: str, number: int) -> None:
    assert parse_version(text) == number


@pytest.mark.parametrize(
    "text", ["", "0", "01", "+1", "-1", " 1", "1 ", "1_000", "١", "²", "1.0", "0x1", "9" * 20]
)
def test_anything_else_is_not_a_version(text: str) -> None:
    assert parse_version(text) is None
