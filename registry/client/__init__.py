"""The Python client of the registry's REST API, and the transfers built on it.

What lives here: ``transport`` (``RegistryClient`` over httpx, ``ClientError`` and how
error bodies are decoded, ``Tally``), ``references`` (``parse_ref``, ``resolve``:
hashes, ``sha256:`` and hash prefixes, names, versions, tags), ``plan`` (what a push
sends), ``push`` (local verification, slim zip, upload), ``chunks`` (large files sent as
the chunks the registry lacks), ``pull`` (download and verify), ``hydrate`` (slim to
full, fetching LINKS from any host), ``blobfetch`` (one file, from the chunks the local
cache lacks), ``cache`` (the local chunk cache and the cartons already verified),
``files`` (client read limits, atomic output), ``credentials`` (the tokens ``login``
saves, one per registry URL), ``lineage`` (diffs of two cartons, a carton's lineage).

It may import ``registry.carton``, httpx and ``registry.chunking`` (pure:
the client cuts files exactly as the registry does); never ``services/``,
``http/`` or ``cli/``, so pushing or pulling loads no database driver or web
framework. The CLI (``registry.cli``) is a thin layer over it; scripts can use it
directly::

    with RegistryClient("http://127.0.0.1:8080") as client:
        outcome = push_carton(client, "model.carton", tag="latest")
        pull_carton(client, outcome.manifest_sha256, "copy.carton", full=True,
                    cache=ChunkCache.default())
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from registry.client.cache import CACHE_WHERE, MAX_BYTES_ENV, ChunkCache, VerifiedCartons
    from registry.client.errors import ClientError
    from registry.client.files import CLIENT_LIMITS, OutputExists
    from registry.client.hydrate import fetch_verified, hydrate_carton
    from registry.client.lineage import get_diff, get_lineage
    from registry.client.plan import PushPlan, plan_push
    from registry.client.pull import pull_carton, verify_manifest
    from registry.client.push import PushOutcome, push_carton, slim_zip
    from registry.client.references import get_model, parse_ref, resolve
    from registry.client.transport import Progress, RegistryClient, Tally
    from registry.client.urls import DEFAULT_URL, check_registry_url, default_url

# Each name's module, imported on first use (PEP 562): a command that only pushes does not
# import pulling, hydrating or lineage code, and ``import registry.client`` costs nothing.
_MODULE_OF = {
    "CACHE_WHERE": "cache",
    "CLIENT_LIMITS": "files",
    "ChunkCache": "cache",
    "ClientError": "errors",
    "DEFAULT_URL": "urls",
    "MAX_BYTES_ENV": "cache",
    "OutputExists": "files",
    "Progress": "transport",
    "PushOutcome": "push",
    "PushPlan": "plan",
    "RegistryClient": "transport",
    "Tally": "transport",
    "VerifiedCartons": "cache",
    "check_registry_url": "urls",
    "default_url": "urls",
    "fetch_verified": "hydrate",
    "get_diff": "lineage",
    "get_lineage": "lineage",
    "get_model": "references",
    "hydrate_carton": "hydrate",
    "parse_ref": "references",
    "plan_push": "plan",
    "pull_carton": "pull",
    "push_carton": "push",
    "resolve": "references",
    "slim_zip": "push",
    "verify_manifest": "pull",
}

__all__ = [
    "CACHE_WHERE",
    "CLIENT_LIMITS",
    "DEFAULT_URL",
    "MAX_BYTES_ENV",
    "ChunkCache",
    "ClientError",
    "OutputExists",
    "Progress",
    "PushOutcome",
    "PushPlan",
    "RegistryClient",
    "Tally",
    "VerifiedCartons",
    "check_registry_url",
    "default_url",
    "fetch_verified",
    "get_diff",
    "get_lineage",
    "get_model",
    "hydrate_carton",
    "parse_ref",
    "plan_push",
    "pull_carton",
    "push_carton",
    "resolve",
    "slim_zip",
    "verify_manifest",
]


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups find it without this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
