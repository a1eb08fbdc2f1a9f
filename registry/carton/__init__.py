"""The carton format: zip read/write, carton.toml, MANIFEST, LINKS, tensor_data.

What lives here: reading (``zipread`` the archive, ``zipchecks`` the distrust checks,
``member`` one member's verified bytes, ``limits`` what an archive is held to) and
writing (``zipwrite``, byte-deterministic), with ``zipformat`` the zip records both
share; the files inside a carton: ``config`` (carton.toml), ``manifest``, ``links``,
``tensor_data``; ``inspect`` (validate and describe a local file); ``errors``.

Imports nothing else of ``registry`` (only the standard library, numpy, tomli_w,
backports.zstd and isal, for CRC-32): it is the bottom of the tree. So the helpers that
every layer shares live here too, and the blob store, services, HTTP layer and client
import them from here: ``streams`` (chunk size, full reads, hashing, counting readers),
``digests`` (the sha256 rule) and ``paths`` (member names and the member-path rule).
Every reader distrusts its input and streams, so multi-GB members use constant memory.
"""

from __future__ import annotations

import importlib
from typing import Any

# Re-exported lazily: importing one submodule (the CLI's errors) must not pull numpy in.
_EXPORTS = {
    "ArchiveLimits": "limits",
    "CARTON_TOML": "paths",
    "CartonArchive": "zipread",
    "CartonConfig": "config",
    "CartonFormatError": "errors",
    "CartonLimitExceeded": "errors",
    "DTYPES": "config",
    "Example": "config",
    "LINKS_NAME": "paths",
    "MANIFEST_NAME": "paths",
    "Manifest": "manifest",
    "ManifestEntry": "manifest",
    "Member": "member",
    "MemberReader": "member",
    "NUMERIC_DTYPES": "tensor_data",
    "RunnerInfo": "config",
    "SHA256_HEX": "digests",
    "SelfTest": "config",
    "StoredZipLayout": "zipwrite",
    "TENSOR_INDEX": "paths",
    "TensorIndexEntry": "tensor_data",
    "TensorSpec": "config",
    "ZipEntry": "zipwrite",
    "build_manifest": "manifest",
    "decode_numeric": "tensor_data",
    "decode_string_tensor": "tensor_data",
    "encode_numeric": "tensor_data",
    "encode_string_tensor": "tensor_data",
    "inspect_carton": "inspect",
    "is_sha256": "digests",
    "load_tensor": "tensor_data",
    "parse_carton_toml": "config",
    "parse_links": "links",
    "parse_manifest": "manifest",
    "parse_tensor_index": "tensor_data",
    "path_problem": "paths",
    "render_carton_toml": "config",
    "sha256_member": "zipread",
    "validate_member_path": "paths",
    "validate_references": "config",
    "version_req_problem": "config",
    "write_links": "links",
    "write_tensor_index": "tensor_data",
    "write_zip": "zipwrite",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
