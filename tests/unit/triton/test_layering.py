"""registry.triton stands alone: importing it loads nothing else of ours, no DB, no HTTP."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import importlib, pkgutil, sys
import registry.triton as package
for module in pkgutil.iter_modules(package.__path__):
    importlib.import_module(f"registry.triton.{module.name}")
print(" ".join(sorted(sys.modules)))
"""


def test_triton_package_imports_only_itself():
    loaded = subprocess.run(
        [sys.executable, "-c", PROBE], check=True, capture_output=True, text=True
    ).stdout.split()
    ours = {m for m in loaded if m == "registry" or m.startswith("registry.")}
    assert {m for m in ours if not m.startswith("registry.triton")} == {"registry"}
    assert "registry.triton.requests" in ours
    assert not {"sqlalchemy", "litestar", "httpx", "boto3"} & set(loaded)
