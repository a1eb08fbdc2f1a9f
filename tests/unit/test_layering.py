"""The import graph points down, as DESIGN.md's "Layout" and each package's docstring say.

Every module under ``registry/`` is read with ``ast`` (nothing is imported), and every
import counts: at the top, inside functions (lazy imports), under ``TYPE_CHECKING``, and
``importlib.import_module("...")`` with a literal name. ``from a.b import c`` counts as an
import of ``a.b.c``, so a rule can allow one name of a module (``registry.cli``'s
``registry.blobstore.errors``, say, rather than the whole blob store).

``MAY_IMPORT`` is the code form of the "may import" sentence in each package's
``__init__`` docstring: change the two together. The invariants DESIGN.md states (nothing
below ``http/`` and ``cli/`` imports them; ``carton/`` and ``triton/`` import nothing of
ours) are asserted on their own as well, so that loosening the table cannot break them.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import registry

PACKAGE_DIR = Path(registry.__file__).parent
VERSION = "registry.__version__"  # the root package holds nothing else

SERVICES = (
    "registry.carton",
    "registry.chunking",
    "registry.blobstore",
    "registry.db",
    "registry.settings",
    "registry.errors",
)
HTTP = (
    "registry.services",
    "registry.errors",
    "registry.settings",
    "registry.humanize",
    "registry.carton.streams",
    "registry.triton.documents",
    "registry.triton.requests",
    VERSION,
)

# Module or package -> what of ours it may import besides its own top-level package
# (``registry.services.gc`` may always import ``registry.services...``). The longest
# matching key applies.
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "registry": (),
    "registry.errors": (),
    "registry.humanize": (),
    "registry.chunking": (),
    "registry.settings": ("registry.carton.limits", "registry.carton.streams"),
    "registry.carton": (),
    "registry.triton": (),
    "registry.blobstore": (
        "registry.carton.streams",
        "registry.carton.digests",
        "registry.settings",
    ),
    "registry.db": ("registry.migrations",),
    "registry.services": SERVICES,
    "registry.services.triton": (*SERVICES, "registry.triton", VERSION),
    "registry.client": (
        "registry.carton",
        "registry.chunking",
    ),
    "registry.http": HTTP,
    "registry.http.errors": (
        *HTTP,
        "registry.blobstore.errors",
        "registry.carton.errors",
        "registry.triton.errors",
    ),
    "registry.app": ("registry.http", "registry.services.context", "registry.settings", VERSION),
    "registry.script": ("registry.cli",),
    "registry.cli.__main__": ("registry.script",),  # ``python -m``: the script's own start
    "registry.allocator": (),
    "registry.worker": ("registry.app", "registry.allocator"),
    "registry.cli": (
        "registry.client",
        "registry.services",
        "registry.carton",
        "registry.settings",
        "registry.errors",
        "registry.humanize",
        "registry.blobstore.errors",
        "registry.app",
        "registry.worker",
        "registry.allocator",
        "registry.http.server",
        "registry.db.engine",
        "registry.db.migrate",
        VERSION,
    ),
}

# Third-party distributions a package's docstring names as all it may use (besides the
# standard library); packages not listed here are not restricted.
MAY_USE: dict[str, set[str]] = {
    "registry.carton": {"numpy", "tomli_w", "backports", "isal"},
    "registry.triton": {"numpy", "msgspec"},
    "registry.client": {"httpx"},
    "registry.chunking": {"blake3", "pyfastcdc"},
    "registry.db": {"sqlalchemy", "alembic"},
}

EDGES = ("registry.http", "registry.cli", "registry.app", "registry.script", "registry.worker")
BELOW_THE_EDGES = (
    "registry.services",
    "registry.chunking",
    "registry.carton",
    "registry.triton",
    "registry.blobstore",
    "registry.db",
    "registry.client",
    "registry.settings",
    "registry.errors",
)


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    line: int
    target: str  # "registry.carton.streams.CHUNK", "numpy", ...

    def __str__(self) -> str:
        return f"{self.module} (line {self.line}) imports {self.target}"


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _import_module_literal(call: ast.Call) -> str | None:
    """The name in ``importlib.import_module("registry.x")`` (None for any other call)."""
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if called != "import_module" or not call.args:
        return None
    first = call.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def imports_of(source: str, module: str, *, is_package: bool = False) -> list[Import]:
    """Every import in ``source``, wherever it stands, with relative names resolved."""
    found: list[Import] = []
    here = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [Import(module, node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = here[: len(here) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found += [
                Import(module, node.lineno, base if alias.name == "*" else f"{base}.{alias.name}")
                for alias in node.names
            ]
        elif isinstance(node, ast.Call) and (name := _import_module_literal(node)):
            found.append(Import(module, node.lineno, name))
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_imports() -> list[Import]:
    found: list[Import] = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        found += imports_of(
            path.read_text(encoding="utf-8"),
            module_name(path),
            is_package=path.name == "__init__.py",
        )
    return found


IMPORTS = all_imports()
OURS = [i for i in IMPORTS if _within(i.target, "registry")]
MODULES = sorted({module_name(p) for p in PACKAGE_DIR.rglob("*.py")})


def covers(key: str, module: str) -> bool:
    """Whether rule ``key`` applies to ``module`` (the root's rule to the root alone)."""
    return module == key if key == "registry" else _within(module, key)


def rule_for(module: str) -> str:
    """The most specific ``MAY_IMPORT`` key covering ``module``."""
    return max((key for key in MAY_IMPORT if covers(key, module)), key=len)


def own_package(module: str) -> str:
    """``registry.services`` for ``registry.services.gc``; the root owns only itself."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else VERSION


def test_the_walker_sees_every_kind_of_import():
    source = (
        "from typing import TYPE_CHECKING\n"
        "import importlib\n"
        "from . import sibling\n"
        "from ..errors import CartonFormatError\n"
        "if TYPE_CHECKING:\n"
        "    from registry.settings import Settings\n"
        "def lazy():\n"
        "    import registry.http.web\n"
        "    return importlib.import_module('registry.cli')\n"
    )
    targets = {i.target for i in imports_of(source, "registry.carton.sub.mod")}
    assert {
        "registry.carton.sub.sibling",
        "registry.carton.errors.CartonFormatError",
        "registry.settings.Settings",
        "registry.http.web",
        "registry.cli",
    } <= targets
    assert {
        i.target for i in imports_of("from .zipread import x", "registry.carton", is_package=True)
    } == {"registry.carton.zipread.x"}


def test_every_module_is_covered_by_a_rule():
    assert "registry.services.triton.repository" in MODULES
    uncovered = [m for m in MODULES if not any(covers(key, m) for key in MAY_IMPORT)]
    assert uncovered == []


def test_no_arrow_points_up_into_http_or_cli():
    upward = [
        str(i)
        for i in OURS
        if any(_within(i.module, low) for low in BELOW_THE_EDGES)
        and any(_within(i.target, edge) for edge in EDGES)
    ]
    assert upward == []


def test_carton_and_triton_import_nothing_of_ours():
    outside = [
        str(i)
        for i in OURS
        for package in ("registry.carton", "registry.triton")
        if _within(i.module, package) and not _within(i.target, package)
    ]
    assert outside == []


def test_the_blob_store_knows_no_services_or_database():
    found = [
        str(i)
        for i in OURS
        if _within(i.module, "registry.blobstore")
        and any(_within(i.target, p) for p in ("registry.services", "registry.db"))
    ]
    assert found == []


@pytest.mark.parametrize("package", sorted(MAY_IMPORT))
def test_each_package_imports_only_what_its_docstring_allows(package: str):
    refused = [
        str(i)
        for i in OURS
        if rule_for(i.module) == package
        and not _within(i.target, own_package(i.module))
        and not any(_within(i.target, allowed) for allowed in MAY_IMPORT[package])
    ]
    assert refused == []


@pytest.mark.parametrize("package", sorted(MAY_USE))
def test_pure_packages_use_only_the_libraries_they_name(package: str):
    # _typeshed is the standard library's own typing module (TYPE_CHECKING imports only).
    allowed = MAY_USE[package] | set(sys.stdlib_module_names) | {"registry", "_typeshed"}
    foreign = [
        str(i)
        for i in IMPORTS
        if _within(i.module, package) and i.target.split(".")[0] not in allowed
    ]
    assert foreign == []
