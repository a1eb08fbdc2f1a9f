"""What changed between two cartons: files, bytes shared at chunk level, tensors, carton.toml.

Everything but the tensor tables comes from the index: the files by path, and for
each file the chunk hashes it is made of (``file_chunks``). A file's ``bytes_shared``
is how many of its bytes the other carton holds: all of them when it holds the same
file, else the bytes of its chunks the other carton's files also contain (anywhere:
a renamed or split file still shares). ``bytes_shared`` at the top counts the ``to``
carton's distinct files, so it equals the share that lineage records.

Weights files (safetensors, ``.npy``) that changed get a tensor list from their
headers, read by ranged reads (``weights_headers``). A tensor whose name, dtype and
shape are unchanged is ``same`` when the chunks covering its bytes are the same chunks
at the same offsets from its start in both files (then its bytes are equal), else
``changed``: a chunk straddling a changed neighbour makes a small tensor look changed.
``exact`` hashes the bytes of just those tensors in both files to decide.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from registry.carton.weights import TensorEntry
from registry.errors import RegistryError
from registry.services import cartons, references
from registry.services.context import RegistryContext
from registry.services.file_chunks import (
    CartonContent,
    FileChunks,
    PackTables,
    load_contents,
    shared_bytes,
)
from registry.services.weights_headers import tensor_digest, tensor_table

TOML_FIELDS = (
    "model_name",
    "short_description",
    "description",
    "spec_version",
    "runner",
    "required_platforms",
    "inputs",
    "outputs",
    "self_tests",
    "examples",
)
SMALL_WHOLE_FILE = 1024 * 1024
"""Whole (unchunked) files up to this size have their tensors compared by their bytes."""


def diff_cartons(
    ctx: RegistryContext, from_ref: str, to_ref: str, *, exact: bool = False
) -> dict[str, Any]:
    """The diff of two cartons, each named by any reference (``references.find_ref``)."""
    with ctx.sessions() as session:
        old = references.find_ref(session, from_ref).manifest_sha256
        new = references.find_ref(session, to_ref).manifest_sha256
        metadata = {
            m: cartons.carton_json(session, cartons.get_carton_row(session, m)) for m in {old, new}
        }
        contents = load_contents(session, {old, new}, PackTables(session))
    old_files, old_chunks = set(contents[old].files), contents[old].chunk_hashes()
    files = _file_changes(ctx, contents[old], contents[new], old_chunks, exact)
    shared = sum(shared_bytes(f, old_files, old_chunks) for f in contents[new].files.values())
    summary = {s: 0 for s in ("added", "removed", "changed", "same")}
    for f in files:
        summary[f["status"]] += 1
    return {
        "from": old,
        "to": new,
        "exact": exact,
        "summary": summary,
        "files": files,
        "bytes_shared": shared,
        "bytes_changed": contents[new].distinct_bytes - shared,
        "toml": toml_changes(metadata[old], metadata[new]),
    }


def toml_changes(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """carton.toml's fields that differ, each ``{"from": ..., "to": ...}``."""
    return {key: {"from": old[key], "to": new[key]} for key in TOML_FIELDS if old[key] != new[key]}


def _side(file: FileChunks | None, sha: str | None, size: int | None) -> dict[str, Any] | None:
    if sha is None:
        return None
    return {"sha256": sha, "size": file.size if file is not None else size}


def _file_changes(
    ctx: RegistryContext,
    old: CartonContent,
    new: CartonContent,
    old_chunks: set[str],
    exact: bool,
) -> list[dict[str, Any]]:
    old_files, new_files = set(old.files), set(new.files)
    new_chunks: set[str] | None = None
    by_sha_old: dict[str, str] = {}
    for path, sha in sorted(old.paths.items()):
        if path not in new.paths:
            by_sha_old.setdefault(sha, path)
    by_sha_new: dict[str, str] = {}
    for path, sha in sorted(new.paths.items()):
        if path not in old.paths:
            by_sha_new.setdefault(sha, path)
    out: list[dict[str, Any]] = []
    for path in sorted(old.paths.keys() | new.paths.keys()):
        a_sha, b_sha = old.paths.get(path), new.paths.get(path)
        a = old.files.get(a_sha) if a_sha else None
        b = new.files.get(b_sha) if b_sha else None
        item: dict[str, Any] = {
            "path": path,
            "from": _side(a, a_sha, None),
            "to": _side(b, b_sha, None),
            "tensors": None,
            "renamed_from": None,
            "renamed_to": None,
        }
        if a_sha == b_sha:
            item.update(status="same", bytes_shared=b.size if b is not None else 0)
        elif b_sha is not None and b is not None:
            item["bytes_shared"] = shared_bytes(b, old_files, old_chunks)
            if a is None:
                item["status"] = "added"
                if b_sha in by_sha_old:
                    item["renamed_from"] = by_sha_old[b_sha]
            else:
                item["status"] = "changed"
                item["tensors"] = tensor_changes(ctx, path, a, b, exact)
        elif a is not None:
            if new_chunks is None:
                new_chunks = new.chunk_hashes()
            item.update(status="removed", bytes_shared=shared_bytes(a, new_files, new_chunks))
            if a_sha in by_sha_new:
                item["renamed_to"] = by_sha_new[a_sha]
        else:  # a file with no index row (never, for stored cartons): nothing to compare
            status = "changed" if a_sha and b_sha else ("added" if b_sha else "removed")
            item.update(status=status, bytes_shared=0)
        out.append(item)
    return out


def tensor_changes(
    ctx: RegistryContext, path: str, old: FileChunks, new: FileChunks, exact: bool
) -> list[dict[str, Any]] | None:
    """The tensors of a changed weights file: added, removed, changed or same (module doc).

    None when the file is not a weights file or a header cannot be read.
    """
    old_table = tensor_table(ctx, path, old.sha256, old.size)
    new_table = tensor_table(ctx, path, new.sha256, new.size)
    if old_table is None or new_table is None:
        return None
    old_by_name = {t.name: t for t in old_table}
    new_names = {t.name for t in new_table}
    out: list[dict[str, Any]] = []
    for t in new_table:
        o = old_by_name.get(t.name)
        item = _tensor(t, "added")
        if o is not None:
            item["status"] = _tensor_status(ctx, old, new, o, t, exact)
            if (o.dtype, o.shape) != (t.dtype, t.shape):
                item.update(from_dtype=o.dtype, from_shape=list(o.shape))
        out.append(item)
    out.extend(_tensor(o, "removed") for o in old_table if o.name not in new_names)
    return out


def _tensor(entry: TensorEntry, status: str) -> dict[str, Any]:
    return {
        "name": entry.name,
        "status": status,
        "dtype": entry.dtype,
        "shape": list(entry.shape),
        "from_dtype": None,
        "from_shape": None,
    }


def _tensor_status(
    ctx: RegistryContext,
    old: FileChunks,
    new: FileChunks,
    o: TensorEntry,
    t: TensorEntry,
    exact: bool,
) -> str:
    if (o.dtype, o.shape) != (t.dtype, t.shape) or o.end - o.start != t.end - t.start:
        return "changed"
    if old.chunks is not None and new.chunks is not None:
        if old.overlapping(o.start, o.end) == new.overlapping(t.start, t.end):
            return "same"  # the same chunks at the same offsets: the same bytes
        if not exact:
            return "changed"
    elif not exact and max(old.size, new.size) > SMALL_WHOLE_FILE:
        return "changed"  # a large whole blob has no chunk list: unproven, so changed
    try:
        equal = tensor_digest(ctx, old.sha256, o) == tensor_digest(ctx, new.sha256, t)
    except RegistryError:
        return "changed"
    return "same" if equal else "changed"


def changed_counts(tensors: Iterable[dict[str, Any]] | None) -> dict[str, int]:
    """How many tensors have each status (for the pages)."""
    counts = {s: 0 for s in ("added", "removed", "changed", "same")}
    for t in tensors or ():
        counts[t["status"]] += 1
    return counts
