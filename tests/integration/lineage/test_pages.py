"""The web side of lineage and diff: model pages, the diff page, the file viewer."""

from __future__ import annotations

import html
import re

import pytest

from tests.helpers import make_carton
from tests.integration.lineage.weights import RETRAINED, WEIGHTS, family
from tests.integration.web.conftest import BROWSER

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201a5f6"
    "45400000000049454e44ae426082"
)
README = b"# Mini\n\n<script>alert(1)</script> [bad](javascript:alert(1)) ![d](@misc/d.png)\n"
SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'


def get(client, url: str, status: int = 200) -> str:
    r = client.get(url, headers=BROWSER)
    assert r.status_code == status, (url, r.text[:300])
    return r.text


@pytest.fixture
def pushed(client) -> dict[str, str]:
    out = {}
    extra = {"README.md": README, "misc/d.png": PNG, "misc/x.svg": SVG}
    for key, version in family().items():
        files = {version.path: version.bytes(), **extra}
        r = client.post(
            "/api/v1/cartons", content=make_carton(files, model_name="mini", stored=True)
        )
        assert r.status_code == 201, r.text
        out[key] = r.json()["manifest_sha256"]
    return out


def test_model_page_shows_lineage_and_family(client, pushed):
    text = get(client, "/models/mini?version=2")
    card = re.search(r'<section class="card lineage">(.*?)</section>', text, re.S).group(1)
    assert '<a href="/models/mini?version=1">mini v1</a>' in card
    assert '<a href="/models/mini/diff?from=1&amp;to=2">diff</a>' in card
    assert '<a href="/models/mini?version=3">mini v3</a>' in card  # its derivative
    family_rows = re.findall(
        r'<td><a href="/models/mini\?version=(\d)">v\d</a></td>\s*<td class="derived">(.*?)</td>',
        text,
        re.S,
    )
    parents = {v: re.sub(r"<[^>]+>", "", p).strip() for v, p in family_rows}
    assert parents == {
        "4": "mini v3",
        "3": "mini v2",
        "2": "mini v1",
        "1": "nothing stored before it",
    }
    # files open in the viewer when it can show them, else as blobs
    assert f'href="/cartons/{pushed["tuned"]}/files/carton.toml"' in text
    assert f'href="/cartons/{pushed["tuned"]}/files/README.md"' in text
    assert f'href="/cartons/{pushed["tuned"]}/files/misc/d.png"' in text
    assert f'href="/cartons/{pushed["tuned"]}/files/{WEIGHTS}"' not in text


def test_diff_page(client, pushed):
    text = get(client, "/models/mini/diff?from=1&to=2&exact=true")
    assert "1 changed" in text and "4 same" in text
    changed = re.findall(r'st-changed">changed</span></td><td><code>([^<]+)</code>', text)
    assert sorted(changed) == sorted(RETRAINED)
    default = get(client, "/models/mini/diff")  # the latest against the one before
    assert "v3</a> → <a" in default and "renamed from model/model.safetensors" in default
    assert "Compare the tensors' bytes" in get(client, "/models/mini/diff?from=1&to=2")
    get(client, "/models/mini/diff?from=x", 400)
    get(client, "/models/mini/diff?from=9", 404)
    get(client, "/models/nobody/diff", 404)


def test_file_viewer_and_raw_files(client, pushed):
    sha = pushed["base"]
    toml = get(client, f"/cartons/{sha}/files/carton.toml")
    assert "model_name = &#34;mini&#34;" in toml or "model_name = &quot;mini&quot;" in toml
    readme = get(client, f"/cartons/{sha}/files/README.md")
    body = readme.split('class="card file-view')[1]
    assert "<h1>Mini</h1>" in body and "<script>" not in body and 'href="javascript' not in body
    assert "&lt;script&gt;" in body
    png = re.search(r'src="(/blobs/[0-9a-f]{64})" alt="d"', body)
    assert png, "@misc/ images resolve to blob URLs as in descriptions"
    image = get(client, f"/cartons/{sha}/files/misc/d.png")
    assert f'<img class="file-image" src="/cartons/{sha}/raw/misc/d.png"' in image

    r = client.get(f"/cartons/{sha}/raw/misc/d.png")
    assert r.status_code == 200 and r.content == PNG
    assert r.headers["content-type"] == "image/png"
    assert "sandbox" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    r = client.get(f"/cartons/{sha}/raw/README.md")
    assert r.headers["content-type"] == "text/plain; charset=utf-8" and r.content == README
    r = client.get(f"/cartons/{sha}/raw/misc/x.svg")  # script in an image: never image/svg
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["content-disposition"] == "attachment"
    assert "No preview" in get(client, f"/cartons/{sha}/files/misc/x.svg")
    r = client.get(f"/cartons/{sha}/raw/{WEIGHTS}", headers={"Range": "bytes=0-7"})
    assert r.headers["content-type"] == "application/octet-stream"

    get(client, f"/cartons/{sha}/files/nope.txt", 404)
    get(client, f"/cartons/{sha[:12]}/files/README.md", 404)
    assert client.get(f"/cartons/{'0' * 64}/raw/README.md").status_code == 404
    assert "mini" in html.unescape(get(client, f"/cartons/{sha}/files/README.md"))
