"""Archive distrust: the checks every zip entry passes before a byte of it is used.

Applied by ``CartonArchive.open`` to what an attacker controls in the central directory:
entry count and directory size (before zipfile parses it), methods, encryption, names,
declared sizes and compression ratios (warehouse's upload checks, DESIGN.md "Default
limits").
"""

from __future__ import annotations

import struct
import threading
from typing import BinaryIO

from backports.zstd import zipfile

from .errors import CartonFormatError, CartonLimitExceeded
from .limits import ArchiveLimits
from .paths import LINKS_NAME, MANIFEST_NAME, path_problem
from .streams import MiB
from .zipformat import LOCAL_MAGIC, METHOD_NAMES, STORED

ROOT_TOLERATED = ("/" + MANIFEST_NAME, "/" + LINKS_NAME)
"""The only absolute entry names accepted (the reference packer writes them)."""

_METHODS = list(METHOD_NAMES.values())
_ALLOWED_METHODS = ", ".join(_METHODS[:-1]) + " and " + _METHODS[-1]  # Stored, Deflate and zstd


def decode_name(info: zipfile.ZipInfo) -> str:
    """The entry name as UTF-8, also when a writer forgot the UTF-8 flag (bit 11)."""
    name = info.orig_filename
    if not info.flag_bits & 0x800 and not name.isascii():
        try:
            return name.encode("cp437").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            pass
    return name


def check_end_record(fp: BinaryIO, lock: threading.Lock, limits: ArchiveLimits) -> None:
    """Reject absurd entry counts / directory sizes before zipfile loads the directory."""
    try:
        with lock:
            endrec = zipfile._EndRecData(fp)  # type: ignore[attr-defined]
    except (OSError, ValueError, struct.error, EOFError):
        endrec = None
    if not endrec:
        raise CartonFormatError(_why_not_a_zip(fp, lock))
    entries, cd_size = endrec[4], endrec[5]
    if entries > limits.max_members:
        raise CartonLimitExceeded(
            f"archive has {entries} entries, more than the limit of {limits.max_members}"
        )
    max_cd = max(MiB, limits.max_members * limits.max_central_directory_bytes_per_member)
    if cd_size > max_cd:
        raise CartonLimitExceeded(
            f"central directory is {cd_size} bytes, more than the limit of {max_cd}"
        )


def _why_not_a_zip(fp: BinaryIO, lock: threading.Lock) -> str:
    """Tell apart an empty input, a zip cut short, and something else: they have other fixes."""
    with lock:
        size = fp.seek(0, 2)
        fp.seek(0)
        head = fp.read(len(LOCAL_MAGIC))
    if size == 0:
        return "not a zip archive: empty (0 bytes)"
    if head == LOCAL_MAGIC:
        return (
            f"truncated zip archive: {size} bytes that start like a zip but end before its "
            "central directory (an upload, download or copy cut short?)"
        )
    return "not a zip archive (no end of central directory record)"


def check_entry(info: zipfile.ZipInfo, name: str, limits: ArchiveLimits) -> None:
    """Raise unless one central-directory entry is safe to read (see the module docstring)."""
    if "\x00" in name:
        raise CartonFormatError(f"entry name {name!r} contains NUL")
    if info.flag_bits & 0x41:
        raise CartonFormatError(f"entry {name!r} is encrypted")
    if info.flag_bits & 0x20:
        raise CartonFormatError(f"entry {name!r} uses compressed patched data")
    if info.compress_type not in METHOD_NAMES:
        raise CartonFormatError(
            f"entry {name!r} uses unsupported compression method {info.compress_type} "
            f"(only {_ALLOWED_METHODS} are allowed)"
        )
    if "\\" in name:
        raise CartonFormatError(f"entry name {name!r} contains a backslash")
    if name.startswith("/") and name not in ROOT_TOLERATED:
        raise CartonFormatError(f"entry name {name!r} is an absolute path")
    if ".." in name.split("/"):
        raise CartonFormatError(f"entry name {name!r} has a '..' segment")
    if not name.startswith("/"):
        problem = path_problem(name[:-1] if name.endswith("/") else name)
        if problem is not None:
            raise CartonFormatError(f"bad entry name: {problem}")
    if name.endswith("/") and info.file_size:
        raise CartonFormatError(f"directory entry {name!r} holds data")
    if info.compress_type == STORED and info.compress_size != info.file_size:
        raise CartonFormatError(
            f"stored entry {name!r} declares {info.file_size} bytes but holds {info.compress_size}"
        )
    if info.file_size > limits.compression_ratio_min_bytes and (
        info.compress_size == 0
        or info.file_size / info.compress_size > limits.max_compression_ratio
    ):
        raise CartonLimitExceeded(
            f"entry {name!r} has a compression ratio above {limits.max_compression_ratio:g} "
            f"({info.file_size} bytes from {info.compress_size})"
        )
