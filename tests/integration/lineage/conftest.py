from tests.cli_runner import cli  # noqa: F401
