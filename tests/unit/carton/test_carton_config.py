"""carton.toml validation against the carton project's own test cases and the spec."""

from __future__ import annotations

import tomllib

import pytest

from registry.carton import (
    CartonFormatError,
    parse_carton_toml,
    render_carton_toml,
    validate_references,
    version_req_problem,
)

from .carton_testlib import CARTON_TOML_DIR

TOML_FIXTURES = sorted(CARTON_TOML_DIR.glob("*.toml"))
GOOD = [p for p in TOML_FIXTURES if not p.name.endswith("_expect_failure.toml")]
BAD = [p for p in TOML_FIXTURES if p.name.endswith("_expect_failure.toml")]

# Why each expected failure fails: the reason, not just "some error".
BAD_REASONS = {
    "invalid_self_test_2_expect_failure.toml": r"self_test\[0\]: inputs\.x = '@\.\.\.' must be "
    r"a string starting with '@tensor_data/'",
    "invalid_self_test_expect_failure.toml": r"self_test\[0\]: inputs\.x = "
    r"'@misc/self_tests_cannot_reference_misc' must be "
    r"a string starting with '@tensor_data/'",
    "required_platforms_expect_failure.toml": r"'aninvalidplatform' is not a valid target triple",
}

RUNNER = '[runner]\nrunner_name = "r"\nrequired_framework_version = "=1.2.3"\n'


def test_fixture_lists_are_complete():
    assert len(GOOD) >= 6 and {p.name for p in BAD} == set(BAD_REASONS)


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.name)
def test_good_fixtures_parse(path):
    cfg = parse_carton_toml(path.read_bytes())
    assert cfg.spec_version == 1 and cfg.runner.runner_name
    assert cfg.raw == tomllib.loads(path.read_text())
    # and render back into something that parses to the same config
    assert parse_carton_toml(render_carton_toml(cfg.raw)) == cfg


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.name)
def test_bad_fixtures_fail_for_the_right_reason(path):
    with pytest.raises(CartonFormatError, match=BAD_REASONS[path.name]):
        parse_carton_toml(path.read_bytes())


def test_complete_fields():
    cfg = parse_carton_toml((CARTON_TOML_DIR / "complete.toml").read_bytes())
    assert cfg.model_name == "super_awesome_test_model"
    x, y = cfg.inputs
    assert (x.name, x.dtype, x.shape) == ("x", "float32", ("batch_size", 3, 512, 512))
    assert x.description == "Something" and x.internal_name == "some_namespace/in_x:0"
    assert y.shape == ("batch_size", 10) and cfg.outputs[0].name == "out"
    st = cfg.self_tests[0]
    assert st.inputs == {"x": "@tensor_data/self_test_tensor_0", "y": "@tensor_data/sometensor"}
    assert st.expected_out == {"out": "@tensor_data/another_tensor"}
    ex = cfg.examples[0]
    assert ex.inputs["x"] == "@misc/input.png" and ex.sample_out == {"out": "@misc/..."}
    r = cfg.runner
    assert (r.runner_name, r.required_framework_version, r.runner_compat_version) == (
        "torchscript",
        "=1.12.1",
        2,
    )
    assert r.opts == {"num_interop_threads": 4, "num_threads": 1}
    assert cfg.required_platforms == ()


def test_shapes():
    cfg = parse_carton_toml((CARTON_TOML_DIR / "shapes.toml").read_bytes())
    assert [s.shape for s in cfg.inputs] == [
        "*",
        "some_symbol",
        ("*",),
        ("some_symbol",),
        (),
        ("batch_size", 3, 512, 512),
        ("*", "*", "*"),
    ]


def test_spec_version_2_unsupported():
    with pytest.raises(CartonFormatError, match="unsupported spec_version 2"):
        parse_carton_toml("spec_version = 2\n" + RUNNER)


def _cfg(body: str) -> str:
    return "spec_version = 1\n" + body + "\n" + RUNNER


@pytest.mark.parametrize(
    "doc,why",
    [
        (RUNNER, "spec_version is required"),
        ('spec_version = "1"\n' + RUNNER, "spec_version must be an integer"),
        ("spec_version = 1\n", r"\[runner\] table is required"),
        ('spec_version = 1\n[runner]\nrequired_framework_version = "=1"\n', "runner_name"),
        (
            'spec_version = 1\n[runner]\nrunner_name = "r"\n',
            "required_framework_version is required",
        ),
        (
            'spec_version = 1\n[runner]\nrunner_name = "r"\n'
            'required_framework_version = "1.2.3.4"\n',
            "not a semver requirement",
        ),
        (
            'spec_version = 1\n[runner]\nrunner_name = "r"\nrequired_framework_version = "=1.2.3"\n'
            "runner_compat_version = -1\n",
            "runner_compat_version",
        ),
        (
            'spec_version = 1\n[runner]\nrunner_name = "r"\nrequired_framework_version = "=1.2.3"\n'
            "[runner.opts]\nx = [1]\n",
            r"runner\.opts\.x",
        ),
        (_cfg('[[input]]\nname = "x"\ndtype = "float16"\nshape = []'), "dtype 'float16'"),
        (_cfg('[[input]]\nname = "x"\ndtype = "bool"\nshape = []'), "dtype 'bool'"),
        (_cfg('[[input]]\nname = "x"\ndtype = "float32"'), "shape is required"),
        (_cfg('[[input]]\nname = "x"\ndtype = "float32"\nshape = [-1]'), "negative"),
        (_cfg('[[input]]\nname = "x"\ndtype = "float32"\nshape = [1.5]'), "not a symbol"),
        (_cfg('[[input]]\nname = "x"\ndtype = "float32"\nshape = 3'), "string or a list"),
        (_cfg('[[input]]\ndtype = "float32"\nshape = []'), "name must be"),
        (
            _cfg(
                '[[input]]\nname = "x"\ndtype = "float32"\nshape = []\n'
                '[[input]]\nname = "x"\ndtype = "float32"\nshape = []'
            ),
            "duplicate input",
        ),
        (_cfg('required_platforms = ["linux"]'), "target triple"),
        (_cfg('required_platforms = "x86_64-unknown-linux-gnu"'), "list of target triples"),
        (_cfg("model_name = 3"), "model_name must be a string"),
        (_cfg('[[self_test]]\ninputs = { x = "@tensor_data/t" }'), "need inputs and outputs"),
        (
            _cfg('[[example]]\ninputs = { x = "@misc/t" }\nsample_out = {}'),
            "need inputs and outputs",
        ),
        (
            _cfg(
                '[[input]]\nname = "x"\ndtype = "float32"\nshape = "*"\n'
                '[[self_test]]\ninputs = { z = "@tensor_data/t" }'
            ),
            "inputs.z does not name a declared",
        ),
        (
            _cfg(
                '[[input]]\nname = "x"\ndtype = "float32"\nshape = "*"\n'
                '[[self_test]]\ninputs = { x = "@tensor_data/t" }\n'
                'expected_out = { y = "@tensor_data/u" }'
            ),
            "expected_out.y does not name a declared output",
        ),
        (
            _cfg(
                '[[input]]\nname = "x"\ndtype = "float32"\nshape = "*"\n[[self_test]]\nname = "n"'
            ),
            "inputs is required",
        ),
        (
            _cfg(
                '[[input]]\nname = "x"\ndtype = "float32"\nshape = "*"\n'
                "[[self_test]]\ninputs = { x = 3 }"
            ),
            "must be a string",
        ),
        (
            _cfg(
                '[[input]]\nname = "x"\ndtype = "float32"\nshape = "*"\n'
                '[[self_test]]\ninputs = { x = "@tensor_data/" }'
            ),
            "must be a string starting",
        ),
        (
            _cfg(
                '[[input]]\nname = "x"\ndtype = "float32"\nshape = "*"\n'
                '[[example]]\ninputs = { x = "@misc/a.png" }'
            ),
            "sample_out is required",
        ),
        (
            _cfg(
                '[[input]]\nname = "x"\ndtype = "float32"\nshape = "*"\n'
                '[[example]]\ninputs = { x = "http://x/a.png" }\nsample_out = {}'
            ),
            "starting with '@tensor_data/' or '@misc/'",
        ),
        ("spec_version = 1\n[runner\n", "not valid TOML"),
        (b"\xff", "UTF-8"),
    ],
)
def test_invalid_configs(doc, why):
    with pytest.raises(CartonFormatError, match=why):
        parse_carton_toml(doc)


def test_unknown_fields_ignored_and_optional_compat():
    cfg = parse_carton_toml(
        'spec_version = 1\nfuture_field = {a = 1}\nlicense = "MIT"\n[[future_table]]\nx = 1\n'
        '[runner]\nrunner_name = "r"\nrequired_framework_version = ">=1.2, <2"\nnew = true\n'
    )
    assert cfg.runner.runner_compat_version is None and cfg.inputs == ()


def test_examples_may_reference_misc_and_outputs_alone_are_fine():
    cfg = parse_carton_toml(
        _cfg(
            '[[output]]\nname = "y"\ndtype = "string"\nshape = ["*"]\n'
            '[[example]]\ninputs = {}\nsample_out = { y = "@misc/out.txt" }'
        )
    )
    assert cfg.examples[0].sample_out == {"y": "@misc/out.txt"}


@pytest.mark.parametrize(
    "req",
    [
        "=1.12.1",
        "1.2.3",
        ">=1.2, <2",
        ">= 1.2 , < 2.0.0",
        "^1.2",
        "~1.2.3",
        "1.2.*",
        "1.*",
        "*",
        "=3.11",
        "1",
        "^0.1.0-alpha.1",
        "=1.0.0+build.5",
        "1.x",
        "1.2.X",
        "~1",
        "<=2.0",
        ">0.0.1",
    ],
)
def test_version_reqs_valid(req):
    assert version_req_problem(req) is None


@pytest.mark.parametrize(
    "req",
    [
        "",
        "1.2.3.4",
        "latest",
        "=",
        ">=x.1",
        "01.2.3",
        "1.*.3",
        "=*",
        "*, >1",
        "1.2-beta",
        "==1.2.3",
        "1.2.3,",
        "v1.2.3",
        "1.2.* - 2",
    ],
)
def test_version_reqs_invalid(req):
    assert version_req_problem(req) is not None


def test_validate_references():
    cfg = parse_carton_toml((CARTON_TOML_DIR / "complete.toml").read_bytes())
    problems = validate_references(cfg, {"sometensor", "something"}, {"misc/input.png"})
    assert len(problems) == 3
    assert any("@tensor_data/self_test_tensor_0" in p for p in problems)
    assert any("@tensor_data/another_tensor" in p for p in problems)
    assert any("@misc/..." in p for p in problems)
    ok = validate_references(
        cfg,
        {"self_test_tensor_0", "sometensor", "another_tensor", "something"},
        {"misc/input.png", "misc/..."},
    )
    assert ok == []


def test_render_rejects_invalid_docs():
    with pytest.raises(CartonFormatError):
        render_carton_toml({"spec_version": 1})
    out = render_carton_toml(
        {
            "spec_version": 1,
            "model_name": "m",
            "runner": {"runner_name": "onnx", "required_framework_version": "=1.16.0"},
        }
    )
    assert parse_carton_toml(out).model_name == "m"
