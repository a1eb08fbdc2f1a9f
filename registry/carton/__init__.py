"""The carton format: zip read/write, carton.toml, MANIFEST, LINKS, tensor_data.

Pure and self-contained (imports nothing else of ``registry``); every reader
distrusts its input and streams, so multi-GB members use constant memory.
"""

from __future__ import annotations

import importlib
from typing import Any

# Re-exported lazily: importing one submodule (the CLI's errors) must not pull numpy in.
_EXPORTS = {
    "ArchiveLimits": "zipread",
    "CartonArchive": "zipread",
    "CartonConfig": "config",
    "CartonFormatError": "errors",
    "CartonLimitExceeded": "errors",
    "DTYPES": "config",
    "Example": "config",
    "LINKS_NAME": "manifest",
    "MANIFEST_NAME": "manifest",
    "Manifest": "manifest",
    "ManifestEntry": "manifest",
    "Member": "zipread",
    "MemberReader": "zipread",
    "NUMPY_DTYPES": "tensor_data",
    "RunnerInfo": "config",
    "SHA256_HEX": "manifest",
    "SelfTest": "config",
    "StoredZipLayout": "zipwrite",
    "TensorIndexEntry": "tensor_data",
    "TensorSpec": "config",
    "ZipEntry": "zipwrite",
    "build_manifest": "manifest",
    "crc32_file": "zipwrite",
    "crc32_stream": "zipwrite",
    "decode_numeric": "tensor_data",
    "decode_string_tensor": "tensor_data",
    "encode_numeric": "tensor_data",
    "encode_string_tensor": "tensor_data",
    "inspect_carton": "inspect",
    "is_sha256": "manifest",
    "load_tensor": "tensor_data",
    "parse_carton_toml": "config",
    "parse_links": "links",
    "parse_manifest": "manifest",
    "parse_tensor_index": "tensor_data",
    "render_carton_toml": "config",
    "sha256_member": "zipread",
    "validate_member_path": "manifest",
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
