"""LINKS parse/write."""

from __future__ import annotations

import pytest

from registry.carton import CartonArchive, CartonFormatError, parse_links, write_links

from .carton_testlib import fixture_carton

H = "a" * 64


def test_fixture_05_links_round_trip():
    with CartonArchive.open(fixture_carton("05")) as a:
        raw = a.read_bytes("LINKS", 1 << 20)
        links = parse_links(raw)
        assert write_links(links) == raw
        assert a.links == links
        missing = {a.manifest.get(p).sha256 for p in a.missing_paths()}
    assert set(links) == missing and len(links) == 2
    for digest, urls in links.items():
        assert urls[0] == f"http://127.0.0.1:8765/blobs/{digest}" and len(urls) == 2


def test_write_is_sorted_and_deterministic():
    b = "b" * 64
    raw = write_links({b: ["https://x/1"], H: ["http://y/2", "http://z/3"]})
    assert (
        raw
        == (
            f'version = 1\n\n[urls]\n{H} = ["http://y/2", "http://z/3"]\n{b} = ["https://x/1"]\n'
        ).encode()
    )
    assert parse_links(raw) == {H: ["http://y/2", "http://z/3"], b: ["https://x/1"]}
    assert write_links({}) == b"version = 1\n\n[urls]\n"


@pytest.mark.parametrize(
    "raw,why",
    [
        (b"version = 2\n[urls]\n", "unsupported version"),
        (b"[urls]\n", "unsupported version"),
        (f'version = 1\n[urls]\n{"A" * 64} = ["http://x/"]\n'.encode(), "sha256"),
        (b'version = 1\n[urls]\nabc = ["http://x/"]\n', "sha256"),
        (f"version = 1\n[urls]\n{H} = []\n".encode(), "non-empty"),
        (f'version = 1\n[urls]\n{H} = ["ftp://x/"]\n'.encode(), "http"),
        (f"version = 1\n[urls]\n{H} = [1]\n".encode(), "http"),
        (b"version = ", "TOML"),
    ],
)
def test_bad_links(raw, why):
    with pytest.raises(CartonFormatError, match=why):
        parse_links(raw)
