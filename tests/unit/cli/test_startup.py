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
