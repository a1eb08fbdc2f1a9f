"""The ``cli`` fixture (tests.cli_runner): commands that need no registry server."""

from tests.cli_runner import cli  # noqa: F401
