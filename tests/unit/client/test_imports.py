"""The client loads no server code: a script that pushes needs no DB driver or web framework."""

from __future__ import annotations

import json
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


def test_importing_the_client_loads_none_of_its_modules_until_a_name_is_used():
    """``registry.client`` names its API lazily (PEP 562): ``push`` loads pushing code only."""
    code = (
        "import json, sys, registry.client as api\n"
        "before = {m for m in sys.modules if m.startswith(('registry.client.', 'httpx'))}\n"
        "api.VerifiedCartons\n"
        "after = {m for m in sys.modules if m.startswith(('registry.client.', 'httpx'))}\n"
        "print(json.dumps([sorted(before), sorted(after)]))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after = json.loads(run.stdout)
    assert before == []
    assert "registry.client.cache" in after
    assert not {"httpx", "registry.client.pull", "registry.client.hydrate"} & set(after)


def test_every_public_name_of_the_client_resolves_to_its_module_s_object():
    import importlib

    import registry.client as api

    for name in api.__all__:
        value = getattr(api, name)
        module = importlib.import_module(f"registry.client.{api._MODULE_OF[name]}")
        assert value is getattr(module, name), name
    assert set(api._MODULE_OF) == set(api.__all__)
    assert set(api.__all__) <= set(dir(api))


def test_an_unknown_name_of_the_client_is_an_attribute_error():
    import pytest

    import registry.client as api

    with pytest.raises(AttributeError, match="has no attribute 'push_everything'"):
        api.push_everything  # noqa: B018
    with pytest.raises(ImportError):
        exec("from registry.client import push_everything")


def test_the_clients_default_port_is_the_one_serve_listens_on():
    """``urls`` keeps its own copy, so that a push does not import the settings module."""
    from registry.client import urls
    from registry.settings import DEFAULT_PORT

    assert urls.DEFAULT_PORT == DEFAULT_PORT
    assert urls.DEFAULT_URL.endswith(f":{DEFAULT_PORT}")
