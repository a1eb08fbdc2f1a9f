"""ZipStream: one forward pass, the same verdicts as CartonArchive, whatever the writer."""

from __future__ import annotations

import hashlib
import io
import random
import struct
import zipfile as stdzip
import zlib

import pytest
from backports.zstd import zipfile

from registry.carton import ArchiveLimits, CartonArchive, CartonFormatError, CartonLimitExceeded
from registry.carton.zipformat import DEFLATED, STORED, ZSTD
from registry.carton.zipstream import ZipStream, check_carton

from .carton_testlib import FIXTURE_CARTONS, carton_files, std_zip, write_zip_bytes


class Trickle(io.RawIOBase):
    """Hands out the bytes in irregular reads, like a request body arriving."""

    def __init__(self, data: bytes, seed: int = 0) -> None:
        self._data = data
        self._at = 0
        self._rng = random.Random(seed)

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        k = self._rng.randint(1, 70_000)
        if n is not None and n >= 0:
            k = min(k, n)
        out = self._data[self._at : self._at + k]
        self._at += len(out)
        return out


def stream_all(data: bytes, seed: int = 0, limits: ArchiveLimits = ArchiveLimits()):
    zs = ZipStream(Trickle(data, seed), limits)
    seen = {}
    for entry in zs:
        if not entry.is_dir:
            body = entry.read()
            seen[entry.path] = hashlib.sha256(body).hexdigest()
    central = zs.finish()
    return seen, central, zs


@pytest.mark.parametrize("path", FIXTURE_CARTONS, ids=lambda p: p.name)
def test_fixtures_stream_as_they_open(path):
    data = path.read_bytes()
    for seed in range(3):
        _, central, zs = stream_all(data, seed)
        carton = check_carton(zs.entries, central, ArchiveLimits())
        with CartonArchive.open(path) as archive:
            assert carton.manifest.raw == archive.manifest.raw
            assert set(central) - {p + "/" for p in archive.dirs} == set(archive.members)
            for member in archive.members.values():
                assert central[member.path].crc32 == member.crc32
                assert central[member.path].size == member.size


@pytest.mark.parametrize("method", [STORED, DEFLATED, ZSTD])
def test_our_writer_with_data_descriptors(method):
    rng = random.Random(method)
    # Member bytes that contain descriptor signatures must not end a member early.
    files = {
        f"model/f{i}": rng.randbytes(rng.randint(0, 200_000)) + b"PK\x07\x08" * rng.randint(0, 3)
        for i in range(12)
    }
    data = write_zip_bytes(carton_files(files), method)
    seen, _, _ = stream_all(data, seed=method)
    for name, body in files.items():
        assert seen[name] == hashlib.sha256(body).hexdigest()


class Dribble(Trickle):
    """Reads of 1 to 7 bytes: every signature prefix falls across pieces somewhere."""

    def read(self, n: int = -1) -> bytes:
        k = self._rng.randint(1, 7)
        out = self._data[self._at : self._at + (k if n is None or n < 0 else min(k, n))]
        self._at += len(out)
        return out


@pytest.mark.parametrize("seed", range(4))
def test_stored_descriptors_found_across_any_piece_boundary(seed):
    """Prefixes of the signature (``P``, ``PK``, ``PK\\x07``) and false signatures, at the
    end of members and of pieces, neither end a member early nor hide its descriptor."""
    rng = random.Random(seed)
    parts = [b"P", b"PK", b"PK\x07", b"PK\x07\x08", b"x", b"PK\x07\x08\x00\x00\x00\x00"]
    files = {
        f"model/f{i}": b"".join(rng.choice(parts) for _ in range(rng.randint(0, 300)))
        + rng.choice(parts)
        for i in range(8)
    }
    data = write_zip_bytes(carton_files(files), STORED)
    zs = ZipStream(Dribble(data, seed), ArchiveLimits())
    seen = {e.path: e.read() for e in zs if not e.is_dir}
    zs.finish()
    for name, body in files.items():
        assert seen[name] == body


class _Unseekable(io.RawIOBase):
    def __init__(self) -> None:
        self.out = io.BytesIO()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        return self.out.write(data)


@pytest.mark.parametrize(
    "compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_ZSTANDARD]
)
def test_python_zipfile_streamed_output(compression):
    sink = _Unseekable()
    files = {f"d/f{i}": random.Random(i).randbytes(30_000 * i) for i in range(6)}
    with zipfile.ZipFile(sink, "w", compression=compression) as z:
        for name, body in files.items():
            with z.open(name, "w") as f:
                f.write(body)
    seen, _, _ = stream_all(sink.out.getvalue())
    assert seen == {k: hashlib.sha256(v).hexdigest() for k, v in files.items()}


def zipped(files: dict[str, bytes], compression: int = stdzip.ZIP_STORED) -> bytes:
    return std_zip(list(carton_files(files).items()), compression)


def small_carton() -> bytes:
    return zipped({"model/a.bin": b"hello" * 1000})


def test_truncated_archive_is_refused():
    data = small_carton()
    for cut in (10, len(data) // 2, len(data) - 10):
        with pytest.raises(CartonFormatError):
            stream_all(data[:cut])


def test_central_directory_must_agree_with_local_headers():
    data = small_carton()
    cd = data.index(b"PK\x01\x02")
    # Rename the first entry in the central directory only.
    name_at = data.index(b"model/a.bin", cd)
    bad = data[:name_at] + b"model/b.bin" + data[name_at + 11 :]
    with pytest.raises(CartonFormatError, match="central directory"):
        stream_all(bad)


def test_crc_mismatch_is_refused():
    data = zipped({"model/a.bin": b"x" * 5000})
    local = data.index(b"PK\x03\x04")
    crc_at = local + 14
    bad = data[:crc_at] + struct.pack("<L", 0xDEADBEEF) + data[crc_at + 4 :]
    with pytest.raises(CartonFormatError, match="CRC"):
        stream_all(bad)


def test_member_inflating_past_its_declared_size_is_refused():
    body = b"a" * 100_000
    data = zipped({"model/a.txt": body}, stdzip.ZIP_DEFLATED)
    local = data.index(b"PK\x03\x04")
    size_at = local + 22
    bad = data[:size_at] + struct.pack("<L", 1000) + data[size_at + 4 :]
    with pytest.raises(CartonFormatError, match=r"inflates past|declares|central directory"):
        stream_all(bad)


def test_garbage_before_the_first_header_is_refused():
    with pytest.raises(CartonFormatError, match="not a zip archive"):
        stream_all(b"MZ" + small_carton())
    with pytest.raises(CartonFormatError, match=r"empty \(0 bytes\)"):
        stream_all(b"")
    with pytest.raises(CartonFormatError, match="truncated zip archive"):
        stream_all(small_carton()[:30])


def test_entry_limits_apply_while_streaming():
    data = small_carton()
    with pytest.raises(CartonLimitExceeded, match="entries"):
        stream_all(data, limits=ArchiveLimits(max_members=1))
    with pytest.raises(CartonLimitExceeded, match="unpacks"):
        stream_all(data, limits=ArchiveLimits(max_unpacked_bytes=100))


def test_compression_ratio_limit_applies_to_members_without_sizes():
    sink = _Unseekable()
    with (
        zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED) as z,
        z.open("model/zeros", "w") as f,
    ):
        f.write(bytes(64 << 20))
    limits = ArchiveLimits(max_compression_ratio=100, compression_ratio_min_bytes=1 << 20)
    with pytest.raises(CartonLimitExceeded, match="ratio"):
        stream_all(sink.out.getvalue(), limits=limits)


def test_forged_descriptor_inside_stored_data_is_caught_by_the_directory_check():
    prefix = b"A" * 1000
    forged = struct.pack("<4s3L", b"PK\x07\x08", zlib.crc32(prefix), len(prefix), len(prefix))
    body = prefix + forged + b"B" * 1000
    data = write_zip_bytes(carton_files({"model/x": body}), STORED)
    with pytest.raises(CartonFormatError):
        stream_all(data)


def test_a_whole_archive_cannot_amplify_its_upload():
    """Many members each under the per-member floor still count against the upload's size."""
    files = {f"model/zeros-{i}": bytes(3 * 1024 * 1024) for i in range(8)}  # 24 MiB of zeros
    data = zipped(files, stdzip.ZIP_DEFLATED)
    assert len(data) < 200 * 1024
    limits = ArchiveLimits(max_expansion_ratio=20, expansion_min_bytes=4 * 1024 * 1024)
    with pytest.raises(CartonLimitExceeded, match="times the"):
        stream_all(data, limits=limits)
    stream_all(data, limits=ArchiveLimits(max_expansion_ratio=1000))  # within the ratio
