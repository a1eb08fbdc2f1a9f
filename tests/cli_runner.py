"""The ``cli`` fixture for any test package: in a conftest.py write

    from tests.cli_runner import cli  # noqa: F401

``cli(*argv)`` runs ``registry.cli.main`` in-process and returns a ``Run``:
exit code, stdout, stderr, and the registry clients the command opened (so a
test can read what a transfer sent). ``XDG_CONFIG_HOME`` points at an empty
folder, so no token a developer saved with ``login`` is sent, and ``XDG_CACHE_HOME``
at another, so each test starts with no chunk cache and leaves none behind.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from registry.cli import main
from registry.client import RegistryClient


@dataclass
class Run:
    code: int
    out: str
    err: str
    clients: list[RegistryClient] = field(default_factory=list)

    @property
    def last_line(self) -> str:
        lines = self.out.strip().splitlines()
        return lines[-1] if lines else ""

    @property
    def client(self) -> RegistryClient:
        """The registry client the command opened (the last one, if several)."""
        assert self.clients, "the command opened no registry client"
        return self.clients[-1]


def run_cli(*argv: str) -> Run:
    """Output is captured with redirect_stdout/redirect_stderr only while ``main``
    runs (not capsys), so log handlers the server installs at start-up keep a
    stream that stays open."""
    clients: list[RegistryClient] = []

    def connect(url: str, token: str | None) -> RegistryClient:
        clients.append(RegistryClient(url, token))
        return clients[-1]

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv), connect=connect)
    return Run(code, out.getvalue(), err.getvalue(), clients)


@pytest.fixture
def cli(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Callable[..., Run]:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    return run_cli
