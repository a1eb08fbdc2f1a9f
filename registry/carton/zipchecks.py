"""Archive distrust: the checks every zip entry passes before a byte of it is used.

Applied by ``CartonArchive.open`` to what an attacker controls in the central directory:
entry count and directory size (before zipfile parses it), methods, encryption, names,
declared sizes and compression ratios (warehouse's upload checks, DESIGN.md "Default
limits").
"""

from __future__ import annotations

import posixpath
import struct
import threading
from collections.abc import Iterable
from typing import BinaryIO

from backports.zstd import zipfile

from .errors import CartonFormatError, CartonLimitExceeded
from .limits import ArchiveLimits
from .manifest import Manifest
from .paths import CARTON_TOML, LINKS_NAME, MANIFEST_NAME, path_problem
from .streams import MiB
from .zipformat import LOCAL_MAGIC, METHOD_NAMES, STORED

ROOT_TOLERATED = ("/" + MANIFEST_NAME, "/" + LINKS_NAME)
MAX_SYMLINK_BYTES = 4096
MAX_SYMLINK_HOPS = 40
"""The only absolute entry names accepted (the reference packer writes them)."""

_METHODS = list(METHOD_NAMES.values())
_ALLOWED_METHODS = ", ".join(_METHODS[:-1]) + " and " + _METHODS[-1]  # Stored, Deflate and zstd


def raw_name(info: zipfile.ZipInfo) -> bytes:
    """The entry name's bytes as stored (zipfile decodes them as UTF-8 or CP437 by flag)."""
    return info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437")


def decode_raw_name(raw: bytes, flags: int) -> str:
    """UTF-8 when flagged, and also when a writer forgot the flag (bit 11); else CP437."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        if flags & 0x800:
            raise CartonFormatError(f"entry name {raw!r} is not UTF-8") from None
        return raw.decode("cp437")


def decode_name(info: zipfile.ZipInfo) -> str:
    """The entry name as UTF-8, also when a writer forgot the UTF-8 flag (bit 11)."""
    return decode_raw_name(raw_name(info), info.flag_bits)


def check_end_record(fp: BinaryIO, lock: threading.Lock, limits: ArchiveLimits) -> None:
    """Reject absurd entry counts / directory sizes before zipfile loads the directory."""
    try:
        with lock:
            endrec = zipfile._EndRecData(fp)  # type: ignore[attr-defined]  # private; none public
    except (OSError, ValueError, struct.error, EOFError):
        endrec = None
    if not endrec:
        with lock:
            size = fp.seek(0, 2)
            fp.seek(0)
            head = fp.read(len(LOCAL_MAGIC))
        raise CartonFormatError(not_a_zip(size, head))
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


def not_a_zip(size: int, head: bytes) -> str:
    """Why ``size`` bytes starting with ``head`` are no zip: empty, cut short, or something
    else (they have other fixes). Shared by both readers, so push and inspect say the same."""
    if size == 0:
        return "not a zip archive: empty (0 bytes)"
    if head.startswith(LOCAL_MAGIC):
        return (
            f"truncated zip archive: {size} bytes that start like a zip but end before its "
            "central directory (an upload, download or copy cut short?)"
        )
    return "not a zip archive (no end of central directory record)"


def entry_problem(
    name: str, flags: int, method: int, compressed_size: int | None, size: int | None
) -> str | None:
    """Why an entry with these header fields is refused, or None (sizes None: not known yet)."""
    if "\x00" in name:
        return f"entry name {name!r} contains NUL"
    if flags & 0x41:
        return f"entry {name!r} is encrypted"
    if flags & 0x20:
        return f"entry {name!r} uses compressed patched data"
    if method not in METHOD_NAMES:
        return (
            f"entry {name!r} uses unsupported compression method {method} "
            f"(only {_ALLOWED_METHODS} are allowed)"
        )
    if "\\" in name:
        return f"entry name {name!r} contains a backslash"
    if name.startswith("/") and name not in ROOT_TOLERATED:
        return f"entry name {name!r} is an absolute path"
    if ".." in name.split("/"):
        return f"entry name {name!r} has a '..' segment"
    if not name.startswith("/"):
        problem = path_problem(name[:-1] if name.endswith("/") else name)
        if problem is not None:
            return f"bad entry name: {problem}"
    if name.endswith("/") and size:
        return f"directory entry {name!r} holds data"
    if (
        method == STORED
        and compressed_size is not None
        and size is not None
        and compressed_size != size
    ):
        return f"stored entry {name!r} declares {size} bytes but holds {compressed_size}"
    return None


def ratio_problem(name: str, compressed_size: int, size: int, limits: ArchiveLimits) -> str | None:
    """A member past the size floor whose compression ratio is over the limit, or None."""
    if size > limits.compression_ratio_min_bytes and (
        compressed_size == 0 or size / compressed_size > limits.max_compression_ratio
    ):
        return (
            f"entry {name!r} has a compression ratio above {limits.max_compression_ratio:g} "
            f"({size} bytes from {compressed_size})"
        )
    return None


def check_entry(info: zipfile.ZipInfo, name: str, limits: ArchiveLimits) -> None:
    """Raise unless one central-directory entry is safe to read (see the module docstring)."""
    problem = entry_problem(
        name, info.flag_bits, info.compress_type, info.compress_size, info.file_size
    )
    if problem is not None:
        raise CartonFormatError(problem)
    problem = ratio_problem(name, info.compress_size, info.file_size, limits)
    if problem is not None:
        raise CartonLimitExceeded(problem)


def check_listed(paths: Iterable[str], manifest: Manifest) -> None:
    """Every zip member but MANIFEST and LINKS must be a MANIFEST path."""
    extra = sorted(p for p in paths if p not in (MANIFEST_NAME, LINKS_NAME) and p not in manifest)
    if extra:
        raise CartonFormatError(f"archive members not listed in MANIFEST: {list_some(extra)}")


def check_carton_toml_size(size: int, limits: ArchiveLimits) -> None:
    if size > limits.max_carton_toml_bytes:
        raise CartonLimitExceeded(
            f"{CARTON_TOML} is {size} bytes, more than the limit of {limits.max_carton_toml_bytes}"
        )


def resolve_symlinks(texts: dict[str, str], regular: set[str]) -> dict[str, str]:
    """Symlink path -> the regular member it leads to inside the carton, or CartonFormatError.

    ``texts`` holds each symlink's target text; ``regular`` the paths of the
    regular members a link may end at (MANIFEST and LINKS excluded).
    """
    targets: dict[str, str] = {}
    for path in texts:
        cur, hops = path, 0
        while cur in texts:
            target = texts[cur]
            if target.startswith("/") or "\x00" in target or "\\" in target or not target:
                raise CartonFormatError(f"symlink {path!r} points outside the carton")
            joined = posixpath.normpath(posixpath.join(posixpath.dirname(cur), target))
            if joined == ".." or joined.startswith("../") or joined in (".", ""):
                raise CartonFormatError(f"symlink {path!r} points outside the carton")
            hops += 1
            if hops > MAX_SYMLINK_HOPS or joined == path:
                raise CartonFormatError(f"symlink {path!r} is part of a loop")
            cur = joined
        if cur not in regular:
            raise CartonFormatError(
                f"symlink {path!r} points to {cur!r}, which is not a file in the carton"
            )
        targets[path] = cur
    return targets


def list_some(items: list[str], limit: int = 5) -> str:
    shown = ", ".join(repr(i) for i in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
