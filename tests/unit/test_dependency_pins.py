"""Libraries whose internals we rely on stay within the versions we have run.

Public APIs change with notice; private ones change in any release. For each library
whose private parts the registry touches, ``TESTED`` holds the range it has run with
and what to re-check before widening it; pyproject.toml must pin exactly that range,
and the installed version must be inside it. A failure here means: re-check the named
code against the new release (its tests, and the release's changes to those names),
then widen the range here and in pyproject.toml together.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import tomllib
import zipfile

import httpx
import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests.conftest import REPO_ROOT

TESTED: dict[str, tuple[str, str]] = {
    "uvicorn": (
        ">=0.54,<0.55",
        "registry/http/server.py: HeaderTimeoutProtocol subclasses "
        "uvicorn.protocols.http.httptools_impl.HttpToolsProtocol (connection_made, "
        "on_message_begin, on_headers_complete, connection_lost, on_body) and uses its "
        "self.cycle (.body, .response_complete, .message_event), self.parser, self.flow, "
        "self.loop, self.transport and flow_control.HIGH_WATER_LIMIT; LargeReads wraps it, "
        "given to uvicorn as its http protocol class, which uvicorn calls with config=, "
        "server_state=, app_state= and _loop=; "
        "tests/integration/hardening/test_slow_clients.py covers the header timeout, "
        "test_large_reads.py the large reads, and every live_server test (uploads "
        "included) runs on both",
    ),
    "httpx": (
        ">=0.28,<0.29",
        "registry/services/linkfetch.py make_client: HTTPTransport._pool; registry/script.py "
        "blocks the import of httpx._main (only start-up time depends on it); "
        "tests/integration/ops/test_ssrf.py covers LINKS pinning",
    ),
    "httpcore": (
        ">=1.0,<1.1",
        "registry/services/linkfetch.py: ConnectionPool._network_backend is replaced by "
        "PinnedBackend (a SyncBackend subclass overriding connect_tcp); "
        "tests/integration/ops/test_ssrf.py covers it",
    ),
}


def pinned() -> dict[str, SpecifierSet]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    requirements = (Requirement(line) for line in project["dependencies"])
    return {r.name.lower(): r.specifier for r in requirements}


@pytest.mark.parametrize("name", sorted(TESTED))
def test_pyproject_pins_the_tested_range(name: str) -> None:
    tested, recheck = TESTED[name]
    pins = pinned()
    assert name in pins, f"pyproject.toml must list {name} (we rely on its internals)"
    assert pins[name] == SpecifierSet(tested), (
        f"pyproject.toml allows {name}{pins[name]}, but it has been run with {name}{tested} "
        f"only. Before widening, re-check {recheck}; then change TESTED in {__file__}."
    )


@pytest.mark.parametrize("name", sorted(TESTED))
def test_the_installed_version_is_in_the_tested_range(name: str) -> None:
    tested, recheck = TESTED[name]
    installed = Version(importlib.metadata.version(name))
    assert installed in SpecifierSet(tested), (
        f"{name} {installed} is installed, outside the range the registry has run with "
        f"({name}{tested}). Re-check {recheck}; then widen TESTED in {__file__} and the pin "
        "in pyproject.toml together."
    )


def test_the_private_names_we_use_are_there() -> None:
    """What the code reaches for, by name: a quick first answer when a release moved one."""
    from uvicorn.protocols.http import flow_control, httptools_impl

    assert isinstance(flow_control.HIGH_WATER_LIMIT, int)
    protocol = inspect.getsource(httptools_impl.HttpToolsProtocol)
    for attribute in ("self.cycle", "self.parser", "self.flow", "self.loop", "self.transport"):
        assert attribute in protocol, f"uvicorn's HttpToolsProtocol no longer sets {attribute}"
    for method in ("on_body", "on_headers_complete", "on_message_begin", "connection_made"):
        assert callable(getattr(httptools_impl.HttpToolsProtocol, method, None)), method
    cycle = inspect.getsource(httptools_impl.RequestResponseCycle.__init__)
    for attribute in ("self.body", "self.response_complete", "self.message_event"):
        assert attribute in cycle, f"uvicorn's RequestResponseCycle no longer sets {attribute}"

    transport = httpx.HTTPTransport()
    try:
        assert hasattr(transport._pool, "_network_backend"), "httpcore's pool lost its backend"
    finally:
        transport.close()

    # The standard library's too: carton/zipchecks.py reads the end record before zipfile
    # loads the central directory (Python versions are not pinned: this is the check).
    assert callable(getattr(zipfile, "_EndRecData", None)), "zipfile._EndRecData is gone"
