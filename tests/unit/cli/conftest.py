"""The ``cli`` fixture (tests.cli_runner): commands that need no registry server.

No test here sees a token a developer saved with ``login``: ``XDG_CONFIG_HOME`` is empty.
"""

import pytest

from tests.cli_runner import cli  # noqa: F401


@pytest.fixture(autouse=True)
def _no_saved_tokens(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
