"""MANIFEST parsing/building: strict, byte-exact, and tolerant of odd-but-legal paths."""

from __future__ import annotations

import hashlib

import pytest

from registry.carton import (
    CartonArchive,
    CartonFormatError,
    build_manifest,
    is_sha256,
    parse_manifest,
    validate_member_path,
)

from .carton_testlib import FIXTURE_CARTONS

H = "a" * 64
H2 = "0123456789abcdef" * 4


@pytest.mark.parametrize("path", FIXTURE_CARTONS, ids=lambda p: p.name)
def test_fixture_manifest_round_trip(path):
    with CartonArchive.open(path) as a:
        raw = a.manifest.raw
    m = parse_manifest(raw)
    assert build_manifest((e.path, e.sha256) for e in m).raw == raw
    assert m.sha256 == hashlib.sha256(raw).hexdigest()
    assert len(m) == len(m.entries) and list(m) == list(m.entries)
    first = m.entries[0]
    assert m.get(first.path) == first and m.get("nope") is None
    assert first.path in m.paths


def test_build_sorts_bytewise_and_terminates_lines():
    m = build_manifest([("b", H), ("a", H2), ("Z", H), ("é", H), ("a b", H)])
    assert m.raw == f"Z={H}\na={H2}\na b={H}\nb={H}\né={H}\n".encode()
    assert [e.path for e in m] == ["Z", "a", "a b", "b", "é"]


@pytest.mark.parametrize(
    "path",
    [
        "a b/c d.txt",
        "x=y",
        "a==b=",
        "#hash",
        "100%",
        "日本語/ファイル",
        "emoji 🥳",
        ".hidden",
        "model/.carton/carton.lock",
        "...",
        "a.b/c..d",
    ],
)
def test_odd_but_valid_paths(path):
    validate_member_path(path)
    m = parse_manifest(f"{path}={H}\n".encode())
    assert m.entries[0].path == path and m.entries[0].sha256 == H


@pytest.mark.parametrize(
    "path,why",
    [
        ("", "empty"),
        ("/abs", "absolute"),
        ("a\\b", "backslash"),
        ("a\x00b", "NUL"),
        ("a\nb", "newline"),
        ("a\rb", "carriage return"),
        ("a/../b", "'..'"),
        ("./a", "'.'"),
        ("a//b", "empty segment"),
        ("a/", "ends with"),
        ("..", "'..'"),
    ],
)
def test_bad_paths(path, why):
    with pytest.raises(CartonFormatError, match=why):
        validate_member_path(path)


@pytest.mark.parametrize(
    "raw,why",
    [
        (b"", "empty"),
        (f"a={H}".encode(), "newline-terminated"),
        (b"a=" + b"0" * 63 + b"\n", "not a lowercase hex sha256"),
        (b"a=" + b"A" * 64 + b"\n", "not a lowercase hex sha256"),
        (b"a=" + b"g" * 64 + b"\n", "not a lowercase hex sha256"),
        (f"a {H}\n".encode(), "expected 'path=sha256'"),
        (f"a={H} \n".encode(), "not a lowercase hex sha256"),
        (f"b={H}\na={H}\n".encode(), "line 2 .*not sorted"),
        (f"a={H}\na={H2}\n".encode(), "line 2 .*duplicate"),
        (f"a={H}\n\n".encode(), "line 2"),
        (f"a={H}\r\n".encode(), "carriage return"),
        (f"/a={H}\n".encode(), "absolute"),
        (f"a/../b={H}\n".encode(), "'..'"),
        (f"a\\b={H}\n".encode(), "backslash"),
        (f"a//b={H}\n".encode(), "empty segment"),
        (b"\xff=" + H.encode() + b"\n", "UTF-8"),
        (f"={H}\n".encode(), "line 1: empty path"),
    ],
)
def test_malformed_manifests(raw, why):
    with pytest.raises(CartonFormatError, match=why):
        parse_manifest(raw)


def test_error_names_line_and_path():
    with pytest.raises(CartonFormatError) as ei:
        parse_manifest(f"a={H}\nmodel/x={'F' * 64}\n".encode())
    assert "line 2" in ei.value.message and "model/x" in ei.value.message


def test_sort_is_bytewise_not_unicode_codepoint_order():
    # UTF-8 bytes EF.. < F0..; UTF-16 order (D83D < FF21) would say the opposite.
    parse_manifest(f"\uff21={H}\n\U0001f600={H}\n".encode())
    with pytest.raises(CartonFormatError, match="not sorted"):
        parse_manifest(f"\U0001f600={H}\n\uff21={H}\n".encode())


def test_build_rejects_duplicates_and_bad_input():
    with pytest.raises(CartonFormatError, match="duplicate"):
        build_manifest([("a", H), ("a", H2)])
    with pytest.raises(CartonFormatError):
        build_manifest([("a/../b", H)])
    with pytest.raises(CartonFormatError):
        build_manifest([])


def test_is_sha256():
    assert is_sha256(H) and not is_sha256(H.upper()) and not is_sha256(H[:-1])


@pytest.mark.parametrize("name", ["MANIFEST", "LINKS"])
def test_manifest_may_not_list_itself_or_links(name: str) -> None:
    raw = f"{name}={'a' * 64}\ncarton.toml={'b' * 64}\n".encode()
    lines = sorted(raw.splitlines(keepends=True))
    with pytest.raises(CartonFormatError, match="must not be listed"):
        parse_manifest(b"".join(lines))
