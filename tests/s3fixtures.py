"""S3 fixtures for any test package: in a conftest.py write

    from tests.s3fixtures import s3_bucket, s3_server  # noqa: F401

``s3_server`` (session) is a ``tests.s3server.S3Server``; ``s3_bucket``
(function) is the name of a fresh, empty bucket on it. When the server cannot
be started the tests are skipped, except under CI (``CI`` set to true), where
they fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.s3server import S3Server, start_s3_server


def running_in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    try:
        server = start_s3_server()
    except Exception as exc:
        message = f"cannot start or reach the test S3 server: {type(exc).__name__}: {exc}"
        if running_in_ci():
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> Iterator[str]:
    if not s3_server.running:
        s3_server.start()  # a previous test stopped it and failed before restarting
    name = s3_server.make_bucket()
    yield name
    if s3_server.running:
        s3_server.delete_bucket(name)
