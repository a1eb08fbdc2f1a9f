"""The carton format: zip read/write, carton.toml, MANIFEST, LINKS, tensor_data.

Pure and self-contained (imports nothing else of ``registry``); every reader
distrusts its input and streams, so multi-GB members use constant memory.
"""

from .config import (
    DTYPES,
    CartonConfig,
    Example,
    RunnerInfo,
    SelfTest,
    TensorSpec,
    parse_carton_toml,
    render_carton_toml,
    validate_references,
    version_req_problem,
)
from .errors import CartonFormatError, CartonLimitExceeded
from .inspect import inspect_carton
from .links import parse_links, write_links
from .manifest import (
    LINKS_NAME,
    MANIFEST_NAME,
    SHA256_HEX,
    Manifest,
    ManifestEntry,
    build_manifest,
    is_sha256,
    parse_manifest,
    validate_member_path,
)
from .tensor_data import (
    NUMPY_DTYPES,
    TensorIndexEntry,
    decode_numeric,
    decode_string_tensor,
    encode_numeric,
    encode_string_tensor,
    load_tensor,
    parse_tensor_index,
    write_tensor_index,
)
from .zipread import ArchiveLimits, CartonArchive, Member, MemberReader, sha256_member
from .zipwrite import StoredZipLayout, ZipEntry, crc32_file, crc32_stream, write_zip

__all__ = [
    "DTYPES",
    "LINKS_NAME",
    "MANIFEST_NAME",
    "NUMPY_DTYPES",
    "SHA256_HEX",
    "ArchiveLimits",
    "CartonArchive",
    "CartonConfig",
    "CartonFormatError",
    "CartonLimitExceeded",
    "Example",
    "Manifest",
    "ManifestEntry",
    "Member",
    "MemberReader",
    "RunnerInfo",
    "SelfTest",
    "StoredZipLayout",
    "TensorIndexEntry",
    "TensorSpec",
    "ZipEntry",
    "build_manifest",
    "crc32_file",
    "crc32_stream",
    "decode_numeric",
    "decode_string_tensor",
    "encode_numeric",
    "encode_string_tensor",
    "inspect_carton",
    "is_sha256",
    "load_tensor",
    "parse_carton_toml",
    "parse_links",
    "parse_manifest",
    "parse_tensor_index",
    "render_carton_toml",
    "sha256_member",
    "validate_member_path",
    "validate_references",
    "version_req_problem",
    "write_links",
    "write_tensor_index",
    "write_zip",
]
