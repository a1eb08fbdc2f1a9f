"""Bad client input answers a clear 4xx JSON error, never a 500."""

from __future__ import annotations

import base64
import json

import pytest

from tests.conftest import fixture_carton

HUGE = "9" * 25


def cursor(values) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


@pytest.fixture
def pushed(client):
    response = client.post("/api/v1/cartons", content=fixture_carton("02").read_bytes())
    assert response.status_code == 201
    return response.json()


@pytest.mark.parametrize(
    ("method", "url", "kwargs"),
    [
        ("DELETE", f"/api/v1/models/selftest_identity/versions/{HUGE}", {}),
        ("GET", f"/models/selftest_identity/versions/{HUGE}.carton", {}),
        ("GET", f"/models/selftest_identity?version={HUGE}", {}),
        ("GET", f"/v2/models/selftest_identity/versions/{HUGE}", {}),
        ("GET", f"/v2/models/selftest_identity/versions/{HUGE}/config", {}),
        ("PUT", "/api/v1/models/selftest_identity/tags/x", {"json": {"version": int(HUGE)}}),
        ("GET", "/api/v1/models?cursor=" + cursor([1, 2]), {}),
        ("GET", "/api/v1/models?sort=recent&cursor=" + cursor([1, 2]), {}),
        ("GET", "/api/v1/models?sort=recent&cursor=" + cursor(["x", 1]), {}),
        ("GET", "/api/v1/models?cursor=" + cursor([[]]), {}),
        ("GET", "/api/v1/models?cursor=" + cursor([{"a": 1}]), {}),
        ("GET", "/api/v1/models?sort=size&cursor=" + cursor([True, 1]), {}),
        ("GET", "/api/v1/models?cursor=%%%", {}),
        ("GET", "/api/v1/models?limit=0", {}),
        ("GET", "/api/v1/models?sort=weird", {}),
        ("GET", "/api/v1/cartons/NOTAHASH", {}),
        ("GET", "/blobs/NOTAHASH", {}),
        ("PUT", "/api/v1/models/selftest_identity/tags/bad%2Ftag", {"json": {"version": 1}}),
        ("PUT", "/api/v1/models/selftest_identity/tags/x", {"json": {"version": "1"}}),
        ("PUT", "/api/v1/models/selftest_identity/tags/x", {"json": {}}),
    ],
)
def test_bad_input_is_a_4xx_json_error(client, pushed, method, url, kwargs):
    response = client.request(method, url, **kwargs)
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    assert response.json()["error"]


def test_runner_compat_version_out_of_range_is_a_400(client):
    import hashlib
    import io

    from backports.zstd import zipfile

    src = fixture_carton("01")
    with zipfile.ZipFile(src) as z:
        toml = z.read("carton.toml").replace(
            b"runner_compat_version = 1", b"runner_compat_version = 99999999999999999999"
        )
        manifest = z.read("MANIFEST").decode()
        names = {i.filename: z.read(i.filename) for i in z.infolist()}
    assert b"99999999999999999999" in toml
    sha = hashlib.sha256(toml).hexdigest()
    manifest = "".join(
        f"carton.toml={sha}\n" if line.startswith("carton.toml=") else line + "\n"
        for line in manifest.splitlines()
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in names.items():
            z.writestr(name, {"carton.toml": toml, "MANIFEST": manifest.encode()}.get(name, data))
    response = client.post("/api/v1/cartons", content=out.getvalue())
    assert response.status_code == 400
    assert "runner_compat_version" in response.json()["error"]
