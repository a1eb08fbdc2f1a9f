"""Range and Accept-Encoding parsing (no server needed)."""

from __future__ import annotations

import pytest

from registry.http.coding import choose_encoding
from registry.http.conditional import Unsatisfiable, parse_range


@pytest.mark.parametrize(
    ("header", "size", "expected"),
    [
        (None, 10, None),
        ("bytes=0-4", 10, (0, 5)),
        ("bytes=3-", 10, (3, 10)),
        ("bytes=-3", 10, (7, 10)),
        ("bytes=-30", 10, (0, 10)),
        ("bytes=5-100", 10, (5, 10)),
        ("Bytes = 1-1", 10, (1, 2)),
        ("bytes=0-1,3-4", 10, None),
        ("items=0-1", 10, None),
        ("bytes=4-2", 10, None),
        ("bytes=x-", 10, None),
        ("bytes=-", 10, None),
        ("bytes=½-", 10, None),
    ],
)
def test_parse_range(header, size, expected):
    assert parse_range(header, size) == expected


@pytest.mark.parametrize(("header", "size"), [("bytes=10-", 10), ("bytes=-0", 10), ("bytes=-5", 0)])
def test_unsatisfiable(header, size):
    with pytest.raises(Unsatisfiable):
        parse_range(header, size)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("", None),
        ("identity", None),
        ("gzip", "gzip"),
        ("x-gzip", "gzip"),
        ("gzip;q=0", None),
        ("gzip;q=0, identity", None),
        ("gzip; q=0.5, identity; q=0.6", None),
        ("gzip; q=0.5, identity; q=0.5", "gzip"),
        ("br;q=1.0, zstd;q=1.0", "zstd"),
        ("deflate;q=bogus, gzip;q=0.1", "gzip"),
        ("*", "zstd"),
        ("*;q=0.3, zstd;q=0", "br"),
        ("compress, identity", None),
    ],
)
def test_choose_encoding(header, expected):
    assert choose_encoding(header) == expected
