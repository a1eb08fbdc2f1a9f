"""The client loads no server code: a script that pushes needs no DB driver or web framework."""

from __future__ import annotations

import subprocess
import sys

SERVER_LIBRARIES = {"sqlalchemy", "litestar", "uvicorn", "boto3", "numpy", "alembic"}
OUR_SERVER_SIDE = {"registry.services", "registry.http", "registry.cli", "registry.db"}


def test_importing_the_client_loads_no_server_code():
    code = "import sys, registry.client; print('\\n'.join(sys.modules))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = run.stdout.split()
    assert not {m.split(".")[0] for m in loaded} & SERVER_LIBRARIES
    assert not {".".join(m.split(".")[:2]) for m in loaded} & OUR_SERVER_SIDE
