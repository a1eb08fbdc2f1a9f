"""Local verification of a carton's members before a push (client.push._verify_all)."""

from __future__ import annotations

import threading
import time

import pytest

from registry.client import ClientError
from registry.client import push as client_push


class Members:
    """Members that hash slowly; the one named ``stale`` fails at once."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.lock = threading.Lock()

    def verify(self, member: str, sha256: str, progress: object = None) -> None:
        with self.lock:
            self.started.append(member)
        if member == "stale":
            raise ClientError(f"{member} does not hash to {sha256}")
        time.sleep(0.2)


def test_a_stale_member_stops_the_checks_not_yet_started(monkeypatch):
    monkeypatch.setattr(client_push, "VERIFY_WORKERS", 2)
    members = Members()
    todo = [("ab" * 32, "stale", 1)] + [("cd" * 32, f"m{i}", 1) for i in range(11)]
    with pytest.raises(ClientError, match="stale"):
        client_push._verify_all(members, todo, None)  # type: ignore[arg-type]
    assert len(members.started) <= 3  # the stale one, the one beside it, maybe one more
