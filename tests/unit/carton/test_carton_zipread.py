"""CartonArchive: reads every reference-packer carton, and distrusts crafted archives."""

from __future__ import annotations

import io
import stat
import struct
import zipfile as stdzip
import zlib

import pytest

from registry.carton import (
    ArchiveLimits,
    CartonArchive,
    CartonFormatError,
    CartonLimitExceeded,
    build_manifest,
    parse_tensor_index,
    sha256_member,
    validate_references,
)

from .carton_testlib import (
    FIXTURE_CARTONS,
    carton_files,
    fixture_carton,
    patch_central,
    sha,
    std_zip,
    write_zip_bytes,
)

# --- the reference packer's cartons ----------------------------------------------


def test_all_fixtures_present():
    assert {p.name[:2] for p in FIXTURE_CARTONS} >= {"01", "02", "03", "05", "py"}


@pytest.mark.parametrize("path", FIXTURE_CARTONS, ids=lambda p: p.name)
def test_fixture_opens_and_validates(path):
    with CartonArchive.open(path) as a:
        cfg = a.config()
        assert cfg is not None and cfg.spec_version == 1
        index = parse_tensor_index(a.read_bytes("tensor_data/index.toml", 1 << 20))
        assert validate_references(cfg, {e.name for e in index}, set(a.manifest.paths)) == []
        for p in a.present_paths():
            digest, size = sha256_member(a, p)
            assert digest == a.manifest.get(p).sha256, p
            assert size == a.members[p].size
        assert set(a.present_paths()) | set(a.missing_paths()) == set(a.manifest.paths)


def test_manifest_hashes_and_03_equals_05():
    hashes = {}
    for p in FIXTURE_CARTONS:
        with CartonArchive.open(p) as a:
            hashes[p.name[:2]] = a.manifest_sha256
            assert a.manifest_sha256 == sha(a.manifest.raw)
    assert hashes["03"] == hashes["05"]
    assert hashes["01"].startswith("76217b06") and hashes["02"].startswith("eb01837e")
    assert hashes["03"].startswith("8cdac637") and hashes["py"].startswith("f1cae514")
    assert len(set(hashes.values())) == 4


def test_05_slim_form():
    with CartonArchive.open(fixture_carton("05")) as a:
        assert a.members["MANIFEST"].raw_name == "/MANIFEST"
        assert a.members["LINKS"].raw_name == "/LINKS"
        assert a.members["MANIFEST"].method == 93
        assert sorted(a.missing_paths()) == [
            "misc/_example_misc_file_0",
            "misc/diagram.png",
            "model/vocab.txt",
        ]
        missing_hashes = {a.manifest.get(p).sha256 for p in a.missing_paths()}
        assert a.links is not None and set(a.links) == missing_hashes
        assert a.unresolvable_paths() == []


def test_05_links_blobs_match(fixtures_dir):
    blobs = fixtures_dir / "reference-packer" / "links-blobs"
    for f in blobs.iterdir():
        assert sha(f.read_bytes()) == f.name


def test_02_identical_files_under_different_paths():
    with CartonArchive.open(fixture_carton("02")) as a:
        by_hash: dict[str, list[str]] = {}
        for e in a.manifest:
            by_hash.setdefault(e.sha256, []).append(e.path)
        assert max(len(v) for v in by_hash.values()) == 4
        assert a.read_bytes("tensor_data/tensor_1.bin", 100) == a.read_bytes(
            "tensor_data/tensor_3.bin", 100
        )


def test_01_members_are_zstd_without_dirs():
    with CartonArchive.open(fixture_carton("01")) as a:
        assert a.members["carton.toml"].method == 93 and a.members["MANIFEST"].method == 0
        assert a.links is None and a.missing_paths() == []


def test_open_from_file_object_and_read_in_pieces():
    data = fixture_carton("python").read_bytes()
    with CartonArchive.open(io.BytesIO(data)) as a:
        with a.open_member("misc/model_architecture.png") as r:
            parts = []
            while chunk := r.read(4097):
                parts.append(chunk)
        blob = b"".join(parts)
        assert sha(blob) == a.manifest.get("misc/model_architecture.png").sha256
        with a.open_member("carton.toml") as r:
            buf = bytearray(10)
            assert r.readinto(buf) == 10 and bytes(buf) == b"spec_versi"


def test_read_bytes_limit():
    with CartonArchive.open(fixture_carton("01")) as a:
        with pytest.raises(CartonLimitExceeded):
            a.read_bytes("carton.toml", 10)
        with pytest.raises(KeyError):
            a.open_member("nope")


# --- distrust: crafted archives -------------------------------------------------


def _open(data: bytes, **limits) -> CartonArchive:
    return CartonArchive.open(io.BytesIO(data), ArchiveLimits(**limits))


def _good(method: int = 0, **files: bytes) -> bytes:
    return write_zip_bytes(carton_files(files or {"model/m.bin": b"weights" * 100}), method)


def test_not_a_zip():
    with pytest.raises(CartonFormatError, match="not a zip archive"):
        _open(b"hello, not a zip" * 100)
    with pytest.raises(CartonFormatError, match="not a zip archive"):
        _open(b"")


def test_empty_truncated_and_non_zip_inputs_are_told_apart():
    with pytest.raises(CartonFormatError, match=r"^not a zip archive: empty \(0 bytes\)$"):
        _open(b"")
    data = _good()
    with pytest.raises(CartonFormatError, match=rf"^truncated zip archive: {len(data) // 2} bytes"):
        _open(data[: len(data) // 2])
    with pytest.raises(CartonFormatError, match=r"^not a zip archive \(no end of central"):
        _open(b"hello, not a zip" * 100)


def test_truncated_zip():
    data = _good()
    with pytest.raises(CartonFormatError):
        _open(data[: len(data) // 2] + data[-22:])


def test_too_many_members():
    files = carton_files({f"model/{i}": b"x" for i in range(3)})
    data = write_zip_bytes(files)  # 3 + carton.toml + MANIFEST = 5 entries
    _open(data, max_members=5).close()
    with pytest.raises(CartonLimitExceeded, match="5 entries"):
        _open(data, max_members=4)


def test_member_count_includes_dirs():
    files = carton_files({"model/a": b"x"})
    data = std_zip([("model/", b""), *files.items()])
    with _open(data, max_members=4) as a:
        assert a.dirs == {"model"} and "model" not in a.members
    with pytest.raises(CartonLimitExceeded):
        _open(data, max_members=3)


def test_unpacked_size_limit():
    data = _good(**{"model/a": b"x" * 1000})
    with pytest.raises(CartonLimitExceeded, match="unpacks to"):
        _open(data, max_unpacked_bytes=1000)


def test_compression_ratio_bomb():
    data = _good(8, **{"model/zeros": bytes(200_000)})
    with pytest.raises(CartonLimitExceeded, match="compression ratio"):
        _open(data, compression_ratio_min_bytes=100_000, max_compression_ratio=50)
    # small members are exempt: all-zero files are legitimate
    _open(data, compression_ratio_min_bytes=300_000, max_compression_ratio=50).close()


def test_carton_toml_limit():
    data = _good()
    with pytest.raises(CartonLimitExceeded, match=r"carton\.toml"):
        _open(data, max_carton_toml_bytes=10)


@pytest.mark.parametrize(
    "name,why",
    [
        ("/etc/passwd", "absolute"),
        ("../evil", "'\\.\\.'"),
        ("model/../../evil", "'\\.\\.'"),
        ("model\\evil", "backslash"),
        ("model//x", "empty segment"),
        ("./model/x", "'\\.'"),
    ],
)
def test_bad_member_names(name, why):
    files = carton_files({"model/a": b"a"})
    with pytest.raises(CartonFormatError, match=why):
        _open(std_zip([*files.items(), (name, b"x")]))


def test_nul_in_name():
    files = carton_files({"model/aXb": b"a"})
    data = write_zip_bytes(files)
    assert data.count(b"model/aXb") == 3  # local, central, MANIFEST
    data = data.replace(b"model/aXb", b"model/a\x00b")
    with pytest.raises(CartonFormatError, match="NUL"):
        _open(data)


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_duplicate_names():
    files = carton_files({"model/a": b"a"})
    with pytest.raises(CartonFormatError, match="duplicate"):
        _open(std_zip([*files.items(), ("model/a", b"a")]))


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_duplicate_manifest_with_and_without_slash():
    files = carton_files({"model/a": b"a"})
    with pytest.raises(CartonFormatError, match="duplicate"):
        _open(std_zip([*files.items(), ("/MANIFEST", files["MANIFEST"])]))


def test_leading_slash_manifest_and_links_tolerated():
    files = carton_files({"model/a": b"a"})
    entries = [(("/MANIFEST" if n == "MANIFEST" else n), d) for n, d in files.items()]
    with _open(std_zip(entries)) as a:
        assert a.members["MANIFEST"].raw_name == "/MANIFEST"
        assert a.manifest.sha256 == sha(files["MANIFEST"])


@pytest.mark.parametrize("method", [stdzip.ZIP_BZIP2, stdzip.ZIP_LZMA])
def test_unsupported_methods(method):
    files = carton_files({"model/a": b"a" * 100})
    with pytest.raises(CartonFormatError, match=f"unsupported compression method {method}"):
        _open(std_zip(list(files.items()), compression=method))


def test_member_not_in_manifest():
    files = carton_files({"model/a": b"a"})
    files["model/sneaky"] = b"x"
    with pytest.raises(CartonFormatError, match="not listed in MANIFEST: 'model/sneaky'"):
        _open(write_zip_bytes(files))


def test_missing_manifest():
    files = carton_files({"model/a": b"a"})
    del files["MANIFEST"]
    with pytest.raises(CartonFormatError, match="no MANIFEST"):
        _open(write_zip_bytes(files))


def test_invalid_manifest_and_links():
    files = carton_files({"model/a": b"a"})
    files["MANIFEST"] = files["MANIFEST"].upper()
    with pytest.raises(CartonFormatError, match="MANIFEST line 1"):
        _open(write_zip_bytes(files))
    files = carton_files({"model/a": b"a"})
    files["LINKS"] = b"version = 3\n"
    with pytest.raises(CartonFormatError, match="LINKS"):
        _open(write_zip_bytes(files))


def test_encrypted_flag():
    files = carton_files({"model/a": b"a"})
    data = patch_central(write_zip_bytes(files), "model/a", flags=0x0801)
    with pytest.raises(CartonFormatError, match="encrypted"):
        _open(data)


def test_stored_size_mismatch_rejected_on_open():
    files = carton_files({"model/a": b"abcdef" * 10})
    data = patch_central(write_zip_bytes(files), "model/a", size=30)
    with pytest.raises(CartonFormatError, match="stored entry"):
        _open(data)


@pytest.mark.parametrize("method", [8, 93])
def test_member_inflating_past_declared_size(method):
    payload = bytes(range(256)) * 40
    files = carton_files({"model/a": payload})
    short = payload[:1000]
    data = patch_central(
        write_zip_bytes(files, method), "model/a", size=len(short), crc=zlib.crc32(short)
    )
    if method == 8:  # the stdlib reader silently truncates: why we check ourselves
        assert stdzip.ZipFile(io.BytesIO(data)).read("model/a") == short
    with _open(data) as a, pytest.raises(CartonFormatError, match="inflates past"):
        sha256_member(a, "model/a")


@pytest.mark.parametrize("method", [0, 8, 93])
def test_member_shorter_than_declared(method):
    payload = b"hello world" * 50
    files = carton_files({"model/a": payload})
    kw = {"size": len(payload) + 10}
    if method == 0:
        kw["csize"] = len(payload) + 10
    data = patch_central(write_zip_bytes(files, method), "model/a", **kw)
    with _open(data) as a, pytest.raises(CartonFormatError):
        a.read_bytes("model/a", 1 << 20)


@pytest.mark.parametrize("method", [0, 8, 93])
def test_bad_crc(method):
    payload = b"hello world" * 50
    files = carton_files({"model/a": payload})
    data = patch_central(write_zip_bytes(files, method), "model/a", crc=zlib.crc32(payload) ^ 1)
    with _open(data) as a, pytest.raises(CartonFormatError, match="CRC-32 mismatch"):
        a.read_bytes("model/a", 1 << 20)


@pytest.mark.parametrize("method", [8, 93])
def test_corrupt_compressed_data(method):
    payload = bytes(range(256)) * 40
    files = carton_files({"model/a": payload})
    data = bytearray(write_zip_bytes(files, method))
    idx = data.index(b"model/a") + len(b"model/a") + 5  # inside the compressed stream
    data[idx : idx + 20] = b"\xff" * 20
    with _open(bytes(data)) as a, pytest.raises(CartonFormatError):
        a.read_bytes("model/a", 1 << 20)


def _symlink(name: str, target: str) -> tuple[stdzip.ZipInfo, bytes]:
    info = stdzip.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, target.encode()


def _with_links(
    real: dict[str, bytes], links: dict[str, str], link_hashes: dict[str, str] | None = None
) -> bytes:
    entries = {**real, "carton.toml": carton_files({})["carton.toml"]}
    manifest = [(p, sha(d)) for p, d in entries.items()]
    manifest += [(p, (link_hashes or {}).get(p, "0" * 64)) for p in links]
    raw = build_manifest(manifest).raw
    return std_zip(
        [*entries.items(), *(_symlink(n, t) for n, t in links.items()), ("MANIFEST", raw)]
    )


def test_symlink_resolves_inside_carton():
    data = _with_links(
        {"model/real.bin": b"REAL"},
        {"model/sub/link.bin": "../real.bin", "model/link2": "sub/link.bin"},
        {"model/sub/link.bin": sha(b"REAL"), "model/link2": sha(b"REAL")},
    )
    with _open(data) as a:
        assert a.members["model/sub/link.bin"].symlink_target == "model/real.bin"
        assert a.members["model/link2"].symlink_target == "model/real.bin"
        assert a.read_bytes("model/link2", 100) == b"REAL"
        assert sha256_member(a, "model/sub/link.bin") == (sha(b"REAL"), 4)
        assert "model/link2" in a.present_paths()


@pytest.mark.parametrize(
    "target,why",
    [
        ("../../etc/passwd", "outside the carton"),
        ("/etc/passwd", "outside the carton"),
        ("../../../model/real.bin", "outside the carton"),
        ("missing.bin", "not a file in the carton"),
        ("../MANIFEST", "not a file in the carton"),
    ],
)
def test_symlink_escaping_or_dangling(target, why):
    data = _with_links({"model/real.bin": b"REAL"}, {"model/link": target})
    with pytest.raises(CartonFormatError, match=why):
        _open(data)


def test_symlink_loop():
    data = _with_links({"model/real.bin": b"REAL"}, {"model/a": "b", "model/b": "a"})
    with pytest.raises(CartonFormatError, match="loop"):
        _open(data)


def test_non_utf8_flag_names_decoded_as_utf8():
    files = carton_files({"model/日本.txt": b"x"})
    data = write_zip_bytes(files)
    # as if a writer forgot bit 11 (in both headers)
    data = bytearray(patch_central(data, "model/日本.txt", flags=0))
    off = stdzip.ZipFile(io.BytesIO(bytes(data))).getinfo("model/µùÑµ£¼.txt").header_offset
    struct.pack_into("<H", data, off + 6, 0)
    data = bytes(data)
    with _open(data) as a:
        assert a.read_bytes("model/日本.txt", 10) == b"x"


@pytest.mark.parametrize("method", [8, 93])
def test_inflation_detected_even_when_reading_exactly_declared_size(method):
    payload = bytes(range(256)) * 40
    short = payload[:1000]
    data = patch_central(
        write_zip_bytes(carton_files({"model/a": payload}), method),
        "model/a",
        size=len(short),
        crc=zlib.crc32(short),
    )
    with (
        _open(data) as a,
        a.open_member("model/a") as r,
        pytest.raises(CartonFormatError, match="inflates past"),
    ):
        r.read(1000)


def test_concurrent_readers_share_one_file_object():
    from concurrent.futures import ThreadPoolExecutor

    data = fixture_carton("python").read_bytes()
    with CartonArchive.open(io.BytesIO(data)) as a:
        paths = a.present_paths() * 4
        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(lambda p: sha256_member(a, p)[0], paths))
        assert got == [a.manifest.get(p).sha256 for p in paths]


def test_limit_errors_are_caught_as_format_errors_and_carry_their_message():
    """Callers catch CartonFormatError (or ValueError) and report ``message`` for every error."""
    data = write_zip_bytes(carton_files({f"model/{i}": b"x" for i in range(3)}))
    for catch in (CartonFormatError, ValueError):
        with pytest.raises(catch) as info:
            _open(data, max_members=2)
        assert isinstance(info.value, CartonLimitExceeded)
        assert str(info.value) == info.value.message
        assert "more than the limit of 2" in info.value.message


def test_stored_span_locates_a_stored_member_in_the_file(tmp_path):
    files = carton_files({"w.bin": b"stored bytes " * 100, "z.bin": b"x" * 5000})
    path = tmp_path / "c.carton"
    path.write_bytes(write_zip_bytes(files))
    with CartonArchive.open(path) as archive:
        offset, size = archive.stored_span("w.bin")
        assert path.read_bytes()[offset : offset + size] == files["w.bin"]
    path.write_bytes(write_zip_bytes(files, method=stdzip.ZIP_DEFLATED))
    with CartonArchive.open(path) as archive:
        assert archive.stored_span("w.bin") is None
