"""Carton references: a manifest hash (bare, ``sha256:<hash>`` or a unique prefix of at least
8 hex digits), ``name``, ``name:version`` (also ``name:vN``, as ``ls`` and the web show
versions) or ``name@tag``.

A bare hex string could be a model name too: the name wins when such a model exists
(as a repository name beats an image-id prefix for ``docker``), then the prefix.
Prefixes are resolved by the registry (``GET /api/v1/cartons/{prefix}``), which answers
409 when several cartons share one.
"""

from __future__ import annotations

import difflib
from typing import Any

from registry.carton.digests import DIGEST_SCHEME, is_hash_prefix, is_sha256
from registry.carton.names import is_tag, parse_version
from registry.client.transport import ClientError, RegistryClient


def manifest_digest(ref: str) -> str | None:
    """The manifest hash a full-hash reference names (bare or ``sha256:``), else None."""
    digest = ref.removeprefix(DIGEST_SCHEME)
    return digest if is_sha256(digest) else None


def parse_ref(ref: str) -> tuple[str | None, int | None, str | None]:
    """``(name, version, tag)``; name is None for a manifest hash or ``sha256:`` reference.

    ``name@tag`` when the part after the last ``@`` is a valid tag,
    ``name:N`` (or ``name:vN``) when the part after the last ``:`` is a version number,
    else ``name`` (model names hold no ``:``, so ``v`` there can only be a version's).
    """
    if manifest_digest(ref) is not None or ref.startswith(DIGEST_SCHEME):
        return None, None, None
    name, at, tag = ref.rpartition("@")
    if at and name and is_tag(tag):
        return name, None, tag
    name, colon, version = ref.rpartition(":")
    if version[:1] in ("v", "V"):
        version = version[1:]
    number = parse_version(version) if colon else None
    if name and number is not None:
        return name, number, None
    if not ref:
        raise ClientError("empty reference")
    return ref, None, None


MAX_SUGGESTIONS = 3
SUGGESTION_SCAN = 10_000  # models read to find near names; a typo's hint is not worth more


def nearest_names(client: RegistryClient, name: str) -> list[str]:
    """Up to three model names close to ``name`` (a typo's likely targets), best first."""
    known: list[str] = []
    try:
        for model in client.list_models():
            known.append(str(model["name"]))
            if len(known) >= SUGGESTION_SCAN:
                break
    except ClientError:  # no right to list, or an old registry: no hint, same error
        return []
    lowered = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=MAX_SUGGESTIONS, cutoff=0.6)
    starts = [k for k in known if k.lower().startswith(name.lower()) and k.lower() not in close]
    return ([lowered[c] for c in close] + starts)[:MAX_SUGGESTIONS]


def no_such_model(client: RegistryClient, name: str, what: str = "") -> ClientError:
    """The 404 for a model name no model has, naming the nearest names there are."""
    near = nearest_names(client, name)
    hint = f"; did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
    return ClientError(f"no model named {name!r}{what}{hint}", 404)


def get_model(client: RegistryClient, name: str) -> dict[str, Any]:
    """``GET /api/v1/models/{name}``; its 404 names the nearest model names."""
    try:
        return client.get_model(name)
    except ClientError as exc:
        if exc.status != 404:
            raise
        raise no_such_model(client, name) from exc


def _by_prefix(client: RegistryClient, ref: str) -> str:
    return str(client.get_carton(ref)["manifest_sha256"])


def resolve(client: RegistryClient, ref: str) -> tuple[str, str | None]:
    """(manifest hash, model name or None) of a reference.

    A name alone means its ``latest`` tag, else its highest version.
    """
    name, version, tag = parse_ref(ref)
    if name is None:
        return manifest_digest(ref) or _by_prefix(client, ref), None
    try:
        model = client.get_model(name)
    except ClientError as exc:
        if exc.status != 404:
            raise
        if version is None and tag is None and is_hash_prefix(name):
            try:
                return _by_prefix(client, name), None
            except ClientError as prefix_exc:
                if prefix_exc.status != 404:
                    raise
            raise no_such_model(client, name, f", and no manifest hash starts with {name}") from exc
        raise no_such_model(client, name) from exc
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
