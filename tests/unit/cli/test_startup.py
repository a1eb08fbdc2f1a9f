"""Client commands start fast: building the parser loads no server code."""

from __future__ import annotations

import subprocess
import sys

SERVER_LIBRARIES = {"sqlalchemy", "litestar", "uvicorn", "boto3", "numpy", "alembic"}
OUR_SERVER_SIDE = {"registry.services", "registry.http", "registry.db"}


def test_help_loads_no_server_code():
    code = (
        "import contextlib, io, sys\n"
        "from registry.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['--help']) == 0\n"
        "print('\\n'.join(sys.modules))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = run.stdout.split()
    assert not {m.split(".")[0] for m in loaded} & SERVER_LIBRARIES
    assert not {".".join(m.split(".")[:2]) for m in loaded} & OUR_SERVER_SIDE


def test_the_script_does_not_load_httpxs_own_command_line_client():
    """``carton-registry`` (registry.script) keeps httpx from importing click, pygments
    and rich's syntax highlighting for a command-line client it never runs."""
    code = (
        "import contextlib, io, sys\n"
        "sys.argv = ['carton-registry', '--help']\n"
        "from registry.script import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main()\n"
        "import httpx\n"
        "print(sys.modules.get('httpx._main'), 'click' in sys.modules, callable(httpx.main))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["None", "False", "True"]
