"""tritonclient, as it is, with a namespaced model: it sends ``acme/bert`` with the ``/``
unencoded (``quote(name)``), and the registry routes it as one name."""

from __future__ import annotations

import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from registry.client import RegistryClient, push_carton
from registry.services.auth import create_token
from tests.conftest import fixture_carton

pytestmark = pytest.mark.settings(auth="write")


def test_tritonclient_with_a_private_namespaced_model(live_server) -> None:
    ctx = live_server.ctx
    admin = create_token(ctx, None, "admin")[0]
    with RegistryClient(live_server.url, admin) as c:
        c.request("PUT", "/api/v1/namespaces/acme", json={"visibility": "private"})
    acme = create_token(ctx, None, "push", ["acme"])[0]
    with RegistryClient(live_server.url, acme) as c:
        pushed = push_carton(c, fixture_carton("03"), namespace="acme")
    name = pushed.response["model_name"]
    assert name.startswith("acme/")
    inside = {"Authorization": f"Bearer {acme}"}
    triton = httpclient.InferenceServerClient(url=live_server.url.removeprefix("http://"))
    try:
        meta = triton.get_model_metadata(name, headers=inside)
        assert meta["name"] == name and meta["versions"] == ["1"]
        assert triton.get_model_metadata(name, "1", headers=inside)["name"] == name
        assert triton.get_model_config(name, headers=inside)
        assert triton.is_model_ready(name, headers=inside)
        index = triton.get_model_repository_index(headers=inside)
        assert [e["name"] for e in index] == [name]
        # outsiders: as if it did not exist
        assert triton.get_model_repository_index() == []
        assert not triton.is_model_ready(name)
        with pytest.raises(InferenceServerException) as caught:
            triton.get_model_metadata(name)
        with pytest.raises(InferenceServerException) as missing:
            triton.get_model_metadata("acme/nosuch")
        assert str(caught.value).replace(name, "X") == str(missing.value).replace(
            "acme/nosuch", "X"
        )
        triton.unload_model(name, headers=inside)
        assert not triton.is_model_ready(name, headers=inside)
        triton.load_model(name, headers=inside)
        assert triton.is_model_ready(name, headers=inside)
    finally:
        triton.close()
