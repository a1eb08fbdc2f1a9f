"""Start-up a user can read (issue 22): ``carton-registry serve`` and ``./scripts/serve``.

``serve`` names what it serves from before it starts (database, blob store, data folder as
an absolute path), refuses a port in use in one line before that, and ``--version`` says
which release runs. ``scripts/serve`` installs only when the project changed, and says so.
The console script runs in a subprocess, as a user runs it (``installed``).
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO_ROOT
from tests.integration.cli.conftest import InstalledCli, assert_no_traceback

pytestmark = pytest.mark.timeout(300)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int) -> list[int]:
    tasks = Path(f"/proc/{pid}/task")
    return [int(c) for task in tasks.iterdir() for c in (task / "children").read_text().split()]


def serve_until_ready(
    installed: InstalledCli, port: int, *options: str, children: list[int] | None = None
) -> tuple[int, str]:
    """Start ``serve``, wait for readiness, stop it with Ctrl-C: (exit status, stderr);
    ``children`` receives the serve process's child processes while it was ready."""
    proc = installed.start("serve", "--port", str(port), *options)
    deadline = time.monotonic() + 120
    try:
        while True:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "serve never became ready"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz?ready=1").status_code == 200:
                    if children is not None:
                        children.extend(_children(proc.pid))
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert_no_traceback(err)
    return proc.returncode, err


def test_the_banner_names_the_database_blob_store_and_absolute_data_folder(installed):
    """With no --workers: serve's default, one worker, serving in the serve process
    itself (no child: the whole server is one interpreter, issue 27's memory target)."""
    data = installed.cwd.resolve() / "data"
    port = free_port()
    children: list[int] = []
    code, err = serve_until_ready(installed, port, children=children)
    assert code == 0, err
    assert children == []
    assert err.splitlines()[:4] == [
        f"carton registry on http://127.0.0.1:{port} (public URL http://127.0.0.1:{port}), "
        "1 uvicorn worker(s)",
        f"  database     sqlite:///{data / 'registry.db'}",
        f"  blob store   file://{data / 'blobs'}",
        f"  data folder  {data} (new: nothing is stored there yet)",
    ]

    # the second start names the same folder; a password never shows, nor does a
    # traceback when the database cannot be reached (one line, exit status 1)
    run = installed(
        "serve",
        "--port",
        str(free_port()),
        "--workers",
        "1",
        env={"REGISTRY_DATABASE_URL": "postgresql://registry:s3cret@127.0.0.1:9/registry"},
    )
    assert run.code == 1
    lines = run.err.splitlines()
    assert len(lines) == 5, run.err
    assert lines[1] == "  database     postgresql://registry:***@127.0.0.1:9/registry"
    assert lines[3] == f"  data folder  {data}"
    assert lines[4].startswith(
        "error: cannot open database postgresql://registry:***@127.0.0.1:9/registry: "
    )
    assert "s3cret" not in run.err


def test_several_workers_migrate_in_a_child_and_report_an_unusable_database_in_one_line(
    installed,
):
    """With several workers the migration runs in a child process (keeping SQLAlchemy out of
    the supervisor); a database it cannot reach is still one line, exit status 1."""
    run = installed(
        "serve",
        "--port",
        str(free_port()),
        "--workers",
        "2",
        env={"REGISTRY_DATABASE_URL": "postgresql://registry:s3cret@127.0.0.1:9/registry"},
    )
    assert run.code == 1
    lines = run.err.splitlines()
    assert len(lines) == 5, run.err
    assert lines[4].startswith(
        "error: cannot open database postgresql://registry:***@127.0.0.1:9/registry: "
    )
    assert "s3cret" not in run.err


def test_a_port_in_use_fails_in_one_line_before_the_banner(installed):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = installed("serve", "--port", str(port))
    assert run.code == 2
    assert run.error == (
        f"error: 127.0.0.1:{port} is in use (is a registry already running?): "
        "choose another with --port"
    )
    assert run.out == ""
    assert list(installed.cwd.iterdir()) == []  # no ./data made for a server that never ran


def test_version(installed):
    run = installed("--version")
    assert run.code == 0 and run.err == ""
    assert run.out == f"carton-registry {importlib.metadata.version('carton-registry')}\n"


# --- scripts/serve ---------------------------------------------------------------------------

STUB_PYTHON = """#!/usr/bin/env bash
# Stands in for python: logs its arguments; `-m venv D` makes D/bin/python (this stub);
# `-m pip install` makes .venv/bin/carton-registry, which logs its arguments too.
echo "python $*" >>"$CALLS"
if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; fi
if [ "$1 $2 $3" = "-m pip install" ]; then
  if [ -n "${STUB_PIP_FAILS:-}" ]; then echo "no matching distribution" >&2; exit 1; fi
  printf '#!/usr/bin/env bash\\necho "carton-registry $*" >>"$CALLS"\\n' >.venv/bin/carton-registry
  chmod +x .venv/bin/carton-registry
fi
"""


def make_stub(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_scripts_serve_installs_only_when_the_project_changed(tmp_path):
    """A copy of the script in a project of its own, with a python that only logs: the
    checkout's .venv is never touched."""
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy2(REPO_ROOT / "scripts" / "serve", project / "scripts" / "serve")
    for name in ("pyproject.toml", "setup.py"):
        shutil.copy2(REPO_ROOT / name, project / name)
    calls = tmp_path / "calls"
    env = {
        **os.environ,
        "PYTHON": str(make_stub(tmp_path / "python", STUB_PYTHON)),
        "CALLS": str(calls),
    }

    def serve(*args: str, status: int = 0, **extra: str) -> tuple[list[str], str]:
        calls.write_text("")
        run = subprocess.run(
            [str(project / "scripts" / "serve"), *args],
            cwd=tmp_path,
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == status, run.stderr
        return calls.read_text().splitlines(), run.stderr

    made, said = serve("--port", "9001")
    assert made == [
        "python -m venv .venv",
        "python -m pip install -q -e .",
        "carton-registry serve --port 9001",
    ]
    assert "serve: creating .venv" in said
    assert "serve: installing the registry and its dependencies into .venv (first run" in said

    again, said = serve()
    assert again == ["carton-registry serve"] and said == ""

    with (project / "pyproject.toml").open("a") as f:
        f.write("\n# a new dependency, say\n")
    failed, said = serve(status=1, STUB_PIP_FAILS="1")
    assert failed == ["python -m pip install -q -e ."]  # and never serves
    assert "no matching distribution" in said and "serve: the install failed" in said
    changed, said = serve()  # tried again, as the project still differs from the install
    assert changed == ["python -m pip install -q -e .", "carton-registry serve"]
    assert "(pyproject.toml or setup.py changed)" in said and "installed in " in said
    assert serve()[0] == ["carton-registry serve"]
