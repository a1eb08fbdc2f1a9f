"""The wheel users install holds every file of the package, and nothing else.

Packages are found, never listed (setup.py): a hand-kept list once left
``registry.services.ingest`` out of every plain install while the editable install the
tests use found it. This builds the wheel as ``scripts/build-wheel`` does (from a clean
copy; ``REGISTRY_TEST_WHEEL`` names one ``scripts/test`` built already) and compares its
files with the source tree's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("REGISTRY_TEST_WHEEL")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [str(REPO_ROOT / "scripts" / "build-wheel"), str(out)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert built.returncode == 0, built.stderr
    return Path(built.stdout.strip().splitlines()[-1])


def source_files(folder: str) -> set[str]:
    """Files of ``folder`` that git knows (tracked, or new and not ignored), relative to it."""
    root = REPO_ROOT / folder
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", folder],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    if listed.returncode == 0:
        paths = {REPO_ROOT / line for line in listed.stdout.splitlines()}
    else:  # not a git checkout (an unpacked tarball): every file but compiled ones
        paths = {p for p in root.rglob("*") if p.is_file()}
    return {
        p.relative_to(root).as_posix()
        for p in paths
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def test_the_wheel_holds_every_module_template_static_file_and_migration(wheel: Path) -> None:
    expected = {f"registry/{name}" for name in source_files("registry")}
    expected |= {f"registry/migrations/{name}" for name in source_files("migrations")}
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if not n.split("/")[0].endswith(".dist-info")]
    shipped = set(names)
    assert len(names) == len(shipped), "a file is in the wheel twice"
    missing, extra = sorted(expected - shipped), sorted(shipped - expected)
    assert not missing, (
        f"{wheel.name} lacks {missing}: a plain install (pip install ., the Dockerfile) would "
        "fail on them. Packages are found by setup.py (every folder under registry/); other "
        "files need a package-data pattern in pyproject.toml"
    )
    assert not extra, f"{wheel.name} ships files the source tree does not have: {extra}"
    # what the source tree must hold for the comparison to mean anything
    for name in (
        "registry/services/ingest/__init__.py",
        "registry/templates/base.html",
        "registry/static/style.css",
        "registry/migrations/env.py",
        "registry/migrations/script.py.mako",
        "registry/migrations/versions/0001_initial_schema.py",
    ):
        assert name in shipped, name


def test_the_wheel_installs_the_script(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        info = next(n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt"))
        entry_points = z.read(info).decode()
    assert "carton-registry = registry.script:main" in entry_points


def test_the_smoke_test_fails_loudly_on_a_wheel_that_lacks_a_package(
    wheel: Path, tmp_path: Path
) -> None:
    """scripts/smoke-installed (which scripts/test runs on the real wheel) on a wheel built
    the old way: without registry.services.ingest."""
    broken = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(broken, "w") as dest:
        for item in source.infolist():
            if not item.filename.startswith("registry/services/ingest/"):
                dest.writestr(item, source.read(item))
    run = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "smoke-installed"), "--wheel", str(broken)],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert run.returncode == 1, run.stderr
    failed = [line for line in run.stderr.splitlines() if "FAILED" in line]
    assert failed == ["smoke-installed: FAILED: serve exited with status 1 before it was ready"]
    assert "No module named 'registry.services.ingest'" in run.stderr  # the server's log
    kept = run.stderr.strip().splitlines()[-1]
    assert kept.startswith("smoke-installed: kept ") and kept.endswith(" for a look")
    shutil.rmtree(kept.removeprefix("smoke-installed: kept ").removesuffix(" for a look"))
