"""Validate a local carton file and describe it as JSON-able data (``inspect FILE``).

Never touches the network: files that are only reachable through LINKS are
listed as linked, not fetched.
"""

from __future__ import annotations

import os
from typing import Any, BinaryIO

from .config import CartonConfig, TensorSpec, validate_references
from .errors import CartonFormatError
from .limits import ArchiveLimits
from .paths import CARTON_TOML, TENSOR_INDEX
from .streams import MiB
from .tensor_data import TensorIndexEntry, parse_tensor_index
from .validate import MAX_STRING_TENSOR_CHECK, self_test_problems, tensor_problems
from .zipread import CartonArchive, sha256_member

_MAX_INDEX_BYTES = 16 * MiB


def _spec_json(s: TensorSpec) -> dict[str, Any]:
    return {
        "name": s.name,
        "dtype": s.dtype,
        "shape": s.shape if isinstance(s.shape, str) else list(s.shape),
        "description": s.description,
        "internal_name": s.internal_name,
    }


def _check_tensors(archive: CartonArchive, entries: list[TensorIndexEntry]) -> list[str]:
    """tensor_data as push checks it; linked files are not fetched, so not checked."""
    return tensor_problems(
        entries,
        archive.manifest,
        lambda path: archive.member_size(path) if path in archive.members else None,
        lambda path: archive.read_bytes(path, MAX_STRING_TENSOR_CHECK),
    )


def inspect_carton(
    path: str | os.PathLike[str] | BinaryIO, limits: ArchiveLimits = ArchiveLimits()
) -> dict[str, Any]:
    """Describe and validate a carton; ``problems`` is empty when it is valid. ``warnings``
    are what a valid carton cannot do: a self test whose tensor's dtype is not its input's
    or output's (the ``/v2`` self test routes refuse it, by the same rule)."""
    result: dict[str, Any] = {
        "manifest_sha256": None,
        "model_name": None,
        "runner": None,
        "inputs": [],
        "outputs": [],
        "files": [],
        "problems": [],
        "warnings": [],
    }
    problems: list[str] = result["problems"]
    try:
        archive = CartonArchive.open(path, limits)
    except CartonFormatError as e:
        problems.append(e.message)
        return result
    except OSError as e:
        problems.append(f"cannot read the file: {e}")
        return result
    with archive:
        manifest = archive.manifest
        result["manifest_sha256"] = manifest.sha256
        links = archive.links or {}
        for entry in manifest:
            if entry.path in archive.members:
                try:
                    digest, size = sha256_member(archive, entry.path)
                except CartonFormatError as e:
                    problems.append(e.message)
                    result["files"].append(
                        {
                            "path": entry.path,
                            "sha256": entry.sha256,
                            "size": archive.member_size(entry.path),
                        }
                    )
                    continue
                if digest != entry.sha256:
                    problems.append(
                        f"{entry.path}: sha256 is {digest}, MANIFEST says {entry.sha256}"
                    )
                result["files"].append({"path": entry.path, "sha256": entry.sha256, "size": size})
            else:
                result["files"].append({"path": entry.path, "sha256": entry.sha256, "linked": True})
                if entry.sha256 not in links:
                    problems.append(f"{entry.path}: not in the zip and not listed in LINKS")

        config: CartonConfig | None = None
        if CARTON_TOML not in manifest:
            problems.append("carton.toml is not listed in MANIFEST")
        elif CARTON_TOML not in archive.members:
            problems.append("carton.toml is not inside the zip (only LINKS reference it)")
        else:
            try:
                config = archive.config()
            except CartonFormatError as e:
                problems.append(e.message)

        tensor_names: set[str] | None = None
        entries_by_name: dict[str, TensorIndexEntry] = {}
        if TENSOR_INDEX not in manifest:
            problems.append(f"{TENSOR_INDEX} is missing (the carton loader requires it)")
        elif TENSOR_INDEX in archive.members:
            try:
                entries = parse_tensor_index(archive.read_bytes(TENSOR_INDEX, _MAX_INDEX_BYTES))
                tensor_names = {e.name for e in entries}
                entries_by_name = {e.name: e for e in entries}
                problems.extend(_check_tensors(archive, entries))
            except CartonFormatError as e:
                problems.append(e.message)

        if config is not None:
            result["model_name"] = config.model_name
            result["runner"] = {
                "runner_name": config.runner.runner_name,
                "required_framework_version": config.runner.required_framework_version,
                "runner_compat_version": config.runner.runner_compat_version,
                "opts": config.runner.opts,
            }
            result["inputs"] = [_spec_json(s) for s in config.inputs]
            result["outputs"] = [_spec_json(s) for s in config.outputs]
            ref_problems = validate_references(
                config, tensor_names if tensor_names is not None else set(), set(manifest.paths)
            )
            if tensor_names is None:  # index unreadable or linked: tensor refs not checkable
                ref_problems = [p for p in ref_problems if "names no tensor" not in p]
            problems.extend(ref_problems)
            # The format allows these (Carton's own reference cartons have them), but no v2
            # client can send such a self test: /v2/.../self_tests refuses it with these words.
            result["warnings"].extend(self_test_problems(config, entries_by_name))
    return result
