"""The first values of a small stored tensor, as the model page shows a self test's or an
example's tensors (a larger one shows its dtype and shape only)."""

from __future__ import annotations

from registry.blobstore import BlobNotFound
from registry.carton.errors import CartonFormatError
from registry.carton.tensor_data import NESTED, TensorIndexEntry, load_tensor
from registry.errors import RegistryError
from registry.services.context import RegistryContext
from registry.services.stored_blobs import blob_bytes

# Read through the verified blob reader, like any download, and only this much per tensor.
PREVIEW_MAX_FILE_BYTES = 64 * 1024
PREVIEW_VALUES = 8


def tensor_preview(
    ctx: RegistryContext, entry: TensorIndexEntry, by_path: dict[str, str], sizes: dict[str, int]
) -> str | None:
    """The first values of a small stored tensor, as the page shows them; None when it is
    nested, large, or cannot be read (the page then shows dtype and shape only)."""
    path = entry.path
    if entry.dtype == NESTED or path is None or path not in by_path:
        return None
    if sizes.get(path, PREVIEW_MAX_FILE_BYTES + 1) > PREVIEW_MAX_FILE_BYTES:
        return None
    try:
        value = load_tensor(entry, lambda p: blob_bytes(ctx, by_path[p]))
    except (BlobNotFound, CartonFormatError, RegistryError, KeyError, ValueError):
        return None
    flat = list(getattr(value, "flat", []))
    shown = ", ".join(repr(v) if isinstance(v, str) else format(v) for v in flat[:PREVIEW_VALUES])
    return f"[{shown}{', …' if len(flat) > PREVIEW_VALUES else ''}]"
