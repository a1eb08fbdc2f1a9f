"""The ``cli`` fixture (tests.cli_runner) for the chunk store tests that push through it."""

from tests.cli_runner import cli  # noqa: F401
