"""A re-push answered from the index (``services/ingest/repush.py``): reads only, the same
answer as the regular push; anything that needs a write goes the regular way."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from backports.zstd import zipfile

from registry.carton.zipread import CartonArchive
from registry.client.files import CLIENT_LIMITS
from registry.client.push import slim_zip
from registry.services import leases
from tests.conftest import fixture_carton
from tests.integration.api.test_push import _with_carton_toml, counts, push, rebuild


def slim(path: Path) -> bytes:
    """What ``carton-registry push`` posts after its uploads: carton.toml, index, MANIFEST."""
    with CartonArchive.open(path, CLIENT_LIMITS) as archive:
        return slim_zip(archive)


@pytest.fixture
def leased(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every lease a push opened: the regular push's first write."""
    opened: list[object] = []
    real = leases.Lease.__init__

    def spy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(self)
        real(self, *args, **kwargs)

    monkeypatch.setattr(leases.Lease, "__init__", spy)
    return opened


def test_a_repush_is_answered_from_the_index_without_a_write(client, registry_ctx, leased):
    carton = fixture_carton("03")
    first = push(client, carton)
    assert first.status_code == 201, first.text
    assert len(leased) == 1
    body = first.json()
    before = counts(registry_ctx)
    expected = {
        **body,
        "bytes_new": 0,
        "bytes_deduplicated": body["bytes_total"],
        "bytes_stored": 0,
    }
    for again in (push(client, slim(carton)), push(client, carton)):
        assert again.status_code == 200, again.text
        assert again.json() == expected
    assert len(leased) == 1  # no lease, so no write
    assert counts(registry_ctx) == before


def test_a_repush_that_moves_a_tag_or_takes_a_new_name_is_indexed(client, registry_ctx, leased):
    with zipfile.ZipFile(fixture_carton("01")) as z:
        toml = z.read("carton.toml")
    unnamed = b"\n".join(line for line in toml.split(b"\n") if not line.startswith(b"model_name"))
    data = _with_carton_toml(fixture_carton("01"), unnamed)
    assert push(client, data, model="first-name").status_code == 201
    assert len(leased) == 1
    again = push(client, data)  # unnamed: answered with the version it has
    assert again.status_code == 200 and len(leased) == 1
    assert (again.json()["model_name"], again.json()["version"]) == ("first-name", 1)

    renamed = push(client, data, model="second-name")
    assert renamed.status_code == 201, renamed.text
    assert (renamed.json()["model_name"], renamed.json()["version"]) == ("second-name", 1)
    assert len(leased) == 2

    tagged = push(client, data, model="second-name", tag="prod")
    assert tagged.status_code == 200, tagged.text
    assert len(leased) == 3
    assert client.get("/api/v1/models/second-name").json()["tags"]["prod"]["version"] == 1


def test_a_repush_of_a_lost_file_goes_the_regular_way(client, registry_ctx, leased):
    """The regular push resolves a lost file (400 listing it for a slim zip, healed by a zip
    that carries it): the index alone cannot answer."""
    carton = fixture_carton("03")
    assert push(client, carton).status_code == 201
    with zipfile.ZipFile(carton) as z:
        vocab = z.read("model/vocab.txt")
    sha = hashlib.sha256(vocab).hexdigest()
    assert registry_ctx.blobs.delete(sha)
    refused = push(client, slim(carton))
    assert refused.status_code == 400
    assert refused.json()["missing"] == [sha]
    healed = push(client, carton)
    assert healed.status_code == 200
    assert healed.json()["bytes_healed"] == len(vocab)
    assert len(leased) == 3


def test_a_tampered_repush_is_refused_as_before(client, registry_ctx, leased):
    carton = fixture_carton("03")
    assert push(client, carton).status_code == 201
    before = counts(registry_ctx)
    with zipfile.ZipFile(carton) as z:
        toml = z.read("carton.toml")
    tampered = rebuild(carton, replace={"carton.toml": toml + b"\n# changed\n"})  # MANIFEST kept
    refused = push(client, tampered)
    assert refused.status_code == 400
    assert "carton.toml" in refused.json()["error"]
    assert counts(registry_ctx) == before
    assert len(leased) == 2  # the regular push read it, and refused it
