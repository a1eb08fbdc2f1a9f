"""Two teams on one registry: ``acme`` (private) and ``open`` (public), real tokens."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from registry.services.auth import create_token
from tests.helpers import make_carton, sha

# A weights file both teams happen to hold, and one only acme has.
SHARED = b"shared weights " * 4096
SECRET = b"acme's secret weights " * 4096


def bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


@dataclass
class Teams:
    admin: str
    acme_push: str
    acme_pull: str
    open_push: str
    acme_sha: str  # manifest of acme/bert version 1

    def h(self, who: str | None) -> dict[str, str]:
        return bearer(None if who is None else getattr(self, who))


def acme_carton() -> bytes:
    return make_carton({"w.bin": SECRET, "shared.bin": SHARED}, model_name="bert")


@pytest.fixture
def teams(client, registry_ctx) -> Teams:
    admin = create_token(registry_ctx, "root", "admin")[0]
    for name, visibility in (("acme", "private"), ("open", "public")):
        r = client.put(
            f"/api/v1/namespaces/{name}", json={"visibility": visibility}, headers=bearer(admin)
        )
        assert r.status_code == 201, r.text
    acme_push = create_token(registry_ctx, None, "delete", ["acme"])[0]
    acme_pull = create_token(registry_ctx, None, "pull", ["acme"])[0]
    open_push = create_token(registry_ctx, None, "push", ["open"])[0]
    r = client.post(
        "/api/v1/cartons",
        content=acme_carton(),
        params={"namespace": "acme", "tag": "prod"},
        headers=bearer(acme_push),
    )
    assert r.status_code == 201, r.text
    assert r.json()["model_name"] == "acme/bert"
    return Teams(admin, acme_push, acme_pull, open_push, r.json()["manifest_sha256"])


__all__ = ["SECRET", "SHARED", "Teams", "acme_carton", "bearer", "sha"]
