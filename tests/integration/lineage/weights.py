"""Real safetensors files (written by the ``safetensors`` package) for a small fine-tune
family: a base, a fine-tune retraining some tensors, one adding a tensor, one renaming the
file. Tensors are seeded random float32, so nothing compresses or repeats by accident."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from safetensors.numpy import save

from tests.helpers import make_carton

WEIGHTS = "model/model.safetensors"
RENAMED = "model/weights.safetensors"

# name -> shape: 4 KiB norms between 256 KiB - 1 MiB projections, about 6 MiB in all
LAYOUT: dict[str, tuple[int, ...]] = {}
for layer in range(4):
    LAYOUT[f"layers.{layer}.norm.weight"] = (1024,)
    LAYOUT[f"layers.{layer}.attn.weight"] = (256, 512)
    LAYOUT[f"layers.{layer}.mlp.up.weight"] = (512, 512)
    LAYOUT[f"layers.{layer}.mlp.down.weight"] = (128, 512)
LAYOUT["lm_head.weight"] = (256, 256)

RETRAINED = ("layers.1.mlp.up.weight", "layers.3.attn.weight")
ADDED = "adapter.lora_a.weight"


@dataclass(frozen=True)
class Version:
    tensors: dict[str, np.ndarray]
    path: str = WEIGHTS

    def bytes(self) -> bytes:
        return save(self.tensors, metadata={"format": "np"})

    def carton(self, model: str, **extra: bytes) -> bytes:
        return make_carton({self.path: self.bytes(), **extra}, model_name=model, stored=True)


def _tensor(seed: int, name: str, shape: tuple[int, ...]) -> np.ndarray:
    key = int.from_bytes(name.encode()[:16].ljust(16, b"\0"), "little")
    return np.random.default_rng([seed, key]).standard_normal(shape).astype(np.float32)


def family() -> dict[str, Version]:
    base = {name: _tensor(1, name, shape) for name, shape in LAYOUT.items()}
    tuned = dict(base)
    for name in RETRAINED:
        tuned[name] = _tensor(2, name, LAYOUT[name])
    grown = {**tuned, ADDED: _tensor(3, ADDED, (64, 512))}
    return {
        "base": Version(base),
        "tuned": Version(tuned),
        "grown": Version(grown),
        "renamed": Version(grown, RENAMED),
    }


def data_ranges(version: Version) -> dict[str, tuple[int, int]]:
    """Each tensor's data as (start, end) offsets in the file."""
    import json
    import struct

    data = version.bytes()
    (length,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8 : 8 + length])
    header.pop("__metadata__", None)
    return {
        n: (8 + length + h["data_offsets"][0], 8 + length + h["data_offsets"][1])
        for n, h in header.items()
    }


def carton_with(files: dict[str, bytes], toml: bytes) -> bytes:
    """A Stored carton of ``files`` whose carton.toml is ``toml``."""
    import io
    import zipfile

    from registry.carton.manifest import build_manifest
    from tests.helpers import sha

    members = {"carton.toml": toml, **files}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for path, data in members.items():
            z.writestr(path, data)
        z.writestr("MANIFEST", build_manifest([(p, sha(d)) for p, d in members.items()]).raw)
    return out.getvalue()
