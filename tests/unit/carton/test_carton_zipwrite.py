"""Writers: round trips through our reader and the stdlib, determinism, ranges, ZIP64."""

from __future__ import annotations

import io
import struct
import zipfile as stdzip
import zlib

import pytest
from backports.zstd import zipfile as zstdzip
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry.carton import (
    CartonArchive,
    CartonFormatError,
    StoredZipLayout,
    ZipEntry,
    sha256_member,
    write_zip,
)

from .carton_testlib import (
    LazyZip,
    carton_files,
    layout_for,
    sha,
    write_zip_bytes,
    zeros_range,
)

_SEGMENT_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="/\\\x00\n\r")
segment = st.text(_SEGMENT_CHARS, min_size=1, max_size=12).filter(lambda s: s not in (".", ".."))
member_path = st.lists(segment, min_size=1, max_size=3).map("/".join)


def _no_prefix_clash(paths: list[str]) -> bool:
    s = set(paths)
    return not any(p + "/" == q[: len(p) + 1] for p in s for q in s if p != q)


cartons = (
    st.dictionaries(
        member_path.map(lambda p: "model/" + p) | st.sampled_from(["misc/a=b #1 %20.png", "x y"]),
        st.binary(max_size=3000) | st.sampled_from([b"", bytes(5000), b"ab" * 4000]),
        min_size=0,
        max_size=8,
    )
    .filter(lambda d: _no_prefix_clash(list(d)))
    .map(carton_files)
)

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _read_all(data: bytes) -> dict[str, bytes]:
    with CartonArchive.open(io.BytesIO(data)) as a:
        assert a.missing_paths() == []
        out = {p: a.read_bytes(p, 1 << 20) for p in a.members}
        for p in a.present_paths():
            assert sha256_member(a, p)[0] == a.manifest.get(p).sha256
    return out


@pytest.mark.parametrize("method", [0, 8, 93])
@SETTINGS
@given(files=cartons)
def test_write_zip_round_trip(method, files):
    data = write_zip_bytes(files, method)
    assert _read_all(data) == files
    reader = zstdzip if method == 93 else stdzip
    with reader.ZipFile(io.BytesIO(data)) as z:
        assert z.testzip() is None
        assert {i.filename: z.read(i) for i in z.infolist()} == files
        for i in z.infolist():
            assert i.date_time == (1980, 1, 1, 0, 0, 0) and i.create_system == 3
            assert i.external_attr >> 16 == 0o100644 and i.flag_bits & 0x800
    assert write_zip_bytes(files, method) == data  # deterministic


@SETTINGS
@given(files=cartons, data=st.data())
def test_stored_layout_round_trip_and_ranges(files, data):
    layout = layout_for(files)
    full = b"".join(layout.iter_bytes())
    assert layout.size == len(full)
    assert b"".join(layout_for(files).iter_bytes(chunk_size=7)) == full  # deterministic
    assert _read_all(full) == files
    with stdzip.ZipFile(io.BytesIO(full)) as z:
        assert z.testzip() is None and [i.filename for i in z.infolist()] == list(files)
    for _ in range(5):
        start = data.draw(st.integers(0, layout.size + 5))
        end = data.draw(st.integers(0, layout.size + 5))
        chunk = data.draw(st.integers(1, 5000))
        assert b"".join(layout.iter_bytes(start, end, chunk_size=chunk)) == full[start:end]


def test_layout_reads_only_requested_member_ranges():
    calls: list[tuple[str, int, int]] = []

    def rr(name: str, payload: bytes):
        def read_range(offset: int, length: int):
            calls.append((name, offset, length))
            yield payload[offset : offset + length]

        return read_range

    a, b = b"A" * 1000, b"B" * 1000
    layout = StoredZipLayout(
        [
            ZipEntry("a", 1000, zlib.crc32(a), rr("a", a)),
            ZipEntry("b", 1000, zlib.crc32(b), rr("b", b)),
        ]
    )
    list(layout.iter_bytes(layout.size - 100))  # central directory only
    assert calls == []
    data_a = 30 + 1  # local header + name
    assert b"".join(layout.iter_bytes(data_a + 10, data_a + 20)) == b"A" * 10
    assert calls == [("a", 10, 10)]


def test_layout_detects_short_read_range():
    e = ZipEntry("a", 10, 0, lambda o, n: iter([b"x" * (n - 1)]))
    with pytest.raises(ValueError, match="yielded 9 bytes"):
        b"".join(StoredZipLayout([e]).iter_bytes())


def test_layout_and_writer_reject_duplicates():
    e = ZipEntry("a", 0, 0, lambda o, n: iter(()))
    with pytest.raises(CartonFormatError, match="duplicate"):
        StoredZipLayout([e, e])
    with pytest.raises(CartonFormatError, match="duplicate"):
        write_zip(io.BytesIO(), [("a", lambda: io.BytesIO(b""), 0)] * 2)
    with pytest.raises(CartonFormatError, match="unsupported"):
        write_zip(io.BytesIO(), [("a", lambda: io.BytesIO(b""), 12)])


def test_write_zip_to_unseekable_stream():
    class Sink:
        def __init__(self) -> None:
            self.parts: list[bytes] = []

        def write(self, b: bytes) -> int:
            self.parts.append(bytes(b))
            return len(b)

    files = carton_files({"model/a": b"abc" * 1000})
    sink = Sink()
    n = write_zip(sink, [(k, (lambda v=v: io.BytesIO(v)), 93) for k, v in files.items()])
    data = b"".join(sink.parts)
    assert n == len(data) and _read_all(data) == files


def test_zip64_layout_over_4gib():
    """A 5 GiB member: ZIP64 sizes and offsets, read lazily (only headers are generated)."""
    big = 5 << 30
    manifest_files = carton_files({"model/big.bin": b""})  # hash irrelevant: never read
    toml = manifest_files["carton.toml"]
    raw_manifest = manifest_files["MANIFEST"]
    entries = [
        ZipEntry("carton.toml", len(toml), zlib.crc32(toml), lambda o, n: iter([toml[o : o + n]])),
        ZipEntry("model/big.bin", big, 0, zeros_range),  # CRC unused: never read whole
        ZipEntry(
            "MANIFEST",
            len(raw_manifest),
            zlib.crc32(raw_manifest),
            lambda o, n: iter([raw_manifest[o : o + n]]),
        ),
    ]
    layout = StoredZipLayout(entries)
    assert layout.size > big
    tail = b"".join(layout.iter_bytes(layout.size - 400))
    assert b"PK\x06\x06" in tail and b"PK\x06\x07" in tail  # ZIP64 end records
    with stdzip.ZipFile(LazyZip(layout)) as z:
        info = z.getinfo("model/big.bin")
        assert info.file_size == big and info.compress_size == big
        m = z.getinfo("MANIFEST")
        assert m.header_offset > 0xFFFFFFFF
        assert z.read("MANIFEST") == raw_manifest  # data after the 4 GiB mark
        with z.open("model/big.bin") as f:
            assert f.read(1000) == bytes(1000)
    with CartonArchive.open(LazyZip(layout)) as a:
        assert a.members["model/big.bin"].size == big
        assert a.manifest.raw == raw_manifest
        with a.open_member("model/big.bin") as r:
            assert r.read(4096) == bytes(4096)


def test_zip64_entry_count():
    """More than 65535 entries needs the ZIP64 end of central directory record."""
    n = 70_000
    empty = ZipEntry("x", 0, 0, lambda o, k: iter(()))
    layout = StoredZipLayout([ZipEntry(f"f{i}", 0, 0, empty.read_range) for i in range(n)])
    data = b"".join(layout.iter_bytes())
    assert len(data) == layout.size
    eocd = data[-22:]
    assert eocd[:4] == b"PK\x05\x06" and struct.unpack("<H", eocd[10:12])[0] == 0xFFFF
    with stdzip.ZipFile(io.BytesIO(data)) as z:
        assert len(z.infolist()) == n and z.infolist()[-1].filename == f"f{n - 1}"


def test_reference_fixture_rebuilt_stored_matches_manifest(fixtures_dir):
    """Re-pack a reference carton Stored with the layout: same MANIFEST, same hashes."""
    src = fixtures_dir / "reference-packer" / "02_selftest_tensors_noop.carton"
    with CartonArchive.open(src) as a:
        files = {p: a.read_bytes(p, 1 << 20) for p in a.present_paths()}
        files["MANIFEST"] = a.manifest.raw
        h = a.manifest_sha256
    data = b"".join(layout_for(files).iter_bytes())
    with CartonArchive.open(io.BytesIO(data)) as b:
        assert b.manifest_sha256 == h
        assert all(
            sha(b.read_bytes(p, 1 << 20)) == b.manifest.get(p).sha256 for p in b.present_paths()
        )
