"""Carton references: a manifest hash, ``name``, ``name:version`` or ``name@tag``."""

from __future__ import annotations

from registry.carton.manifest import is_sha256
from registry.carton.names import is_tag, parse_version
from registry.client.transport import ClientError, RegistryClient


def parse_ref(ref: str) -> tuple[str | None, int | None, str | None]:
    """``(name, version, tag)``; name is None for a manifest hash.

    ``name@tag`` when the part after the last ``@`` is a valid tag,
    ``name:N`` when the part after the last ``:`` is an integer, else ``name``.
    """
    if is_sha256(ref):
        return None, None, None
    name, at, tag = ref.rpartition("@")
    if at and name and is_tag(tag):
        return name, None, tag
    name, colon, version = ref.rpartition(":")
    number = parse_version(version) if colon else None
    if name and number is not None:
        return name, number, None
    if not ref:
        raise ClientError("empty reference")
    return ref, None, None


def resolve(client: RegistryClient, ref: str) -> tuple[str, str | None]:
    """(manifest hash, model name or None) of a reference.

    A name alone means its ``latest`` tag, else its highest version.
    """
    name, version, tag = parse_ref(ref)
    if name is None:
        return ref, None
    model = client.get_model(name)
    if tag is not None:
        entry = model.get("tags", {}).get(tag)
        if entry is None:
            raise ClientError(f"model {name!r} has no tag {tag!r}", 404)
        return entry["manifest_sha256"], name
    versions = model.get("versions", [])
    if version is not None:
        for v in versions:
            if v["version"] == version:
                return v["manifest_sha256"], name
        raise ClientError(f"model {name!r} has no version {version}", 404)
    latest = model.get("tags", {}).get("latest")
    if latest is not None:
        return latest["manifest_sha256"], name
    if not versions:
        raise ClientError(f"model {name!r} has no versions", 404)
    best = max(versions, key=lambda v: v["version"])
    return best["manifest_sha256"], name
