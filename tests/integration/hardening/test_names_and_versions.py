"""Versions parse strictly wherever a URL or reference carries one, and model names follow
the one grammar references can address (issue 12), on every backend pair."""

from __future__ import annotations

import pytest

from registry.errors import InvalidName, InvalidReference
from registry.services.references import resolve_ref
from tests.conftest import fixture_carton
from tests.helpers import make_carton


@pytest.fixture
def pushed(client):
    response = client.post("/api/v1/cartons", content=fixture_carton("02").read_bytes())
    assert response.status_code == 201
    return response.json()


@pytest.mark.parametrize("spelling", ["+1", "%201", "1%20", "01", "%2B1", "1.0", "%C2%B2", "0"])
def test_a_version_that_is_not_plain_digits_deletes_nothing(client, pushed, spelling):
    name = pushed["model_name"]
    response = client.delete(f"/api/v1/models/{name}/versions/{spelling}")
    assert response.status_code == 400, response.text
    assert "invalid model version" in response.json()["error"]
    assert client.get(f"/api/v1/models/{name}").json()["versions"][0]["version"] == 1
    assert client.delete(f"/api/v1/models/{name}/versions/1").status_code == 200


@pytest.mark.parametrize("spelling", ["+1", "01", "%201", "1%20"])
def test_a_carton_url_with_a_non_canonical_version_names_no_carton(client, pushed, spelling):
    url = f"/models/{pushed['model_name']}/versions/{spelling}.carton"
    assert client.get(url, follow_redirects=False).status_code == 404
    assert client.get(f"/models/{pushed['model_name']}/versions/1.carton").status_code == 200


@pytest.mark.parametrize(
    "url",
    [
        "/models/{name}?version=+1",
        "/models/{name}?version=%C2%B2",
        "/v2/models/{name}/versions/+1",
        "/v2/models/{name}/versions/01/config",
        "/v2/models/{name}/versions/%D9%A1/ready",
    ],
)
def test_other_urls_refuse_non_canonical_versions(client, pushed, url):
    response = client.get(url.format(name=pushed["model_name"]), follow_redirects=False)
    assert response.status_code == 400, response.text


@pytest.mark.parametrize("name", ["team@model", "model:v2", "ctl\x85", " padded"])
def test_a_push_named_outside_the_grammar_is_a_400_naming_the_rule(client, name):
    carton = make_carton({"w": b"1"}, model_name=None)
    response = client.post("/api/v1/cartons", content=carton, params={"model": name})
    assert response.status_code == 400
    assert "'@' or ':'" in response.json()["error"]


def test_references_parse_strictly(registry_ctx, client, pushed):
    name = pushed["model_name"]
    assert resolve_ref(registry_ctx, f"{name}:1").version == 1
    for bad in (f"{name}:+1", f"{name}:01", f"{name}: 1", f"{name}@-x", f"{name}:1@latest"):
        with pytest.raises((InvalidName, InvalidReference)):
            resolve_ref(registry_ctx, bad)
