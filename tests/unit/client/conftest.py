"""A ``RegistryClient`` whose requests a test answers (httpx.MockTransport)."""

from __future__ import annotations

import httpx
import pytest

from registry.client import RegistryClient


@pytest.fixture
def mock_client():
    """``mock_client(handler, token=None)``: a client of http://reg.test answered by ``handler``."""

    def make(handler, token=None) -> RegistryClient:
        return RegistryClient("http://reg.test", token, transport=httpx.MockTransport(handler))

    return make
