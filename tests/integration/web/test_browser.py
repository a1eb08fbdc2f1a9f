"""End to end in headless Chromium (Debian's ``chromium``) against a live server.

Driven over the DevTools protocol (``cdp.py``): opens the listing, searches
through the form (it submits ``/?q=`` with GET), clicks a model, and downloads
its carton by following the link from the rendered DOM. It takes
screenshots of ``/``, a model page and ``/stats`` at laptop and phone widths;
with ``REGISTRY_UPDATE_SCREENSHOTS=1`` they are written to ``docs/screenshots/``.
Skipped when Chromium is missing, except under CI (CI=true), where that fails.
"""

from __future__ import annotations

import hashlib
import html
import io
import os
import re
import shutil
from pathlib import Path
from urllib.parse import urljoin

import httpx
import pytest
from backports.zstd import zipfile

from tests import finetune
from tests.conftest import REPO_ROOT, fixture_carton
from tests.helpers import carton_toml, make_carton
from tests.integration.web.cdp import Browser
from tests.integration.web.conftest import manifest_sha256, small_model, with_carton_toml
from tests.s3fixtures import running_in_ci

pytestmark = pytest.mark.browser

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")
SIZES = {"laptop": (1280, 900, 1, False), "phone": (390, 844, 2, True)}
SCREENSHOTS = REPO_ROOT / "docs" / "screenshots"


OVERFLOWING = (  # boxes whose content is wider than they are (cut off, or scrolling)
    "[...document.querySelectorAll('#snippet, .hash, .crumbs, .title, .lede')]"
    ".filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.className || e.id)"
)
SNIPPET_TEXT = "document.getElementById('snippet').textContent"


def find_chromium() -> str | None:
    for name in CHROMIUM_CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture
def browser(tmp_path: Path):
    path = find_chromium()
    if path is None:
        if running_in_ci():
            pytest.fail("headless Chromium is required under CI (apt-get install chromium)")
        pytest.skip("headless Chromium not installed (apt-get install chromium)")
    b = Browser(path, tmp_path / "chromium-profile")
    try:
        yield b
    finally:
        b.close()


DEMO_DESCRIPTION = """Image embeddings for retrieval, trained on a curated web crawl.

## Usage
Feed a batch of images resized to **224×224**; get one 512-d unit vector per image.
Compare vectors with cosine similarity.

- Fast on CPU: ~4 ms per image with 4 threads
- Deterministic outputs (no dropout at inference)

See the [model card](https://example.com/model-card) for training details.
"""

DEMO_MODELS = [
    ("bert-base-uncased", "Masked language model, 12 layers, English.", "torchscript"),
    ("whisper-tiny-en", "Speech to text for English audio.", "python"),
    ("resnet50-imagenet", "ImageNet classifier, 1000 classes, top-1 76.1%.", "torchscript"),
    ("fraud-score-xgb", "Transaction fraud score from 48 tabular features.", "xgboost"),
    ("sentiment-distilbert", "Positive or negative sentiment of English text.", "torchscript"),
    ("yolo-v8n-coco", "Real-time object detection, 80 COCO classes.", "python"),
    ("churn-predictor", "Monthly churn probability per account.", "xgboost"),
]

FINETUNE_DESCRIPTION = (
    b'model_description = "A small chat model; each checkpoint stores only what it retrained."'
    b"\n\n[runner]"
)


def seed(base: str) -> dict[str, str]:
    """Push a realistic little catalogue; returns name -> manifest hash."""
    pushed: dict[str, str] = {}
    with httpx.Client(base_url=base, timeout=60) as http:

        def push(data: bytes) -> dict:
            r = http.post("/api/v1/cartons", content=data)
            assert r.status_code in (200, 201), r.text
            return r.json()

        for name, desc, runner in DEMO_MODELS:
            pushed[name] = push(small_model(name, desc, runner))["manifest_sha256"]
        push(small_model("resnet50-imagenet", "ImageNet classifier, retrained.", "torchscript"))
        for path in (fixture_carton("02"), fixture_carton("03")):
            body = push(path.read_bytes())
            pushed[body["model_name"]] = body["manifest_sha256"]
        with zipfile.ZipFile(fixture_carton("02")) as z:
            toml = z.read("carton.toml").decode()
        toml = toml.replace(
            "model_name = 'selftest_identity'", "model_name = 'clip-image-embedder'"
        )
        toml = toml.replace(
            "model_description = 'Returns its inputs unchanged.'",
            "model_description = '''\n" + DEMO_DESCRIPTION + "'''",
        ).replace(
            "short_description = 'Identity model with self tests and numeric tensor_data'",
            "short_description = 'Image embeddings for retrieval (512-d, cosine)'",
        )
        body = push(with_carton_toml(fixture_carton("02"), toml.encode()))
        pushed["clip-image-embedder"] = body["manifest_sha256"]
        r = http.put("/api/v1/models/clip-image-embedder/tags/prod", json={"version": 1})
        assert r.status_code in (200, 201), r.text
        retrained = toml.replace("trained on a curated", "retrained on a larger, curated")
        push(with_carton_toml(fixture_carton("02"), retrained.encode()))
        toml = carton_toml("tinyllama-chat").replace(b"\n[runner]", FINETUNE_DESCRIPTION, 1)
        for change in finetune.family(finetune.MIN_DATA_SIZE)[:3]:  # checkpoints: chunk dedup
            files = {"carton.toml": toml, "model/model.safetensors": change.file.to_bytes()}
            push(make_carton(files, model_name=None, stored=True))
    return pushed


@pytest.mark.parametrize("backend", ["sqlite-fs"], indirect=True)
def test_browse_search_open_and_download(live_server, browser, tmp_path):
    base = live_server.url
    pushed = seed(base)
    browser.viewport(*SIZES["laptop"])

    browser.goto(base + "/")
    listing = browser.dom()
    assert "clip-image-embedder" in listing and "fraud-score-xgb" in listing
    assert "saved by dedup" in listing

    # search through the form: it submits /?q=TEXT with GET
    browser.submit_and_wait(
        "const f = document.querySelector('form.search');"
        "f.querySelector('input[name=q]').value = 'misc files'; f.submit();"
    )
    assert browser.url() == base + "/?q=misc+files"
    results = browser.dom()
    links = re.findall(r'class="model-name" href="([^"]+)"', results)
    assert links == ["/models/misc_and_strings"], links

    # open the model by clicking its link
    browser.submit_and_wait("document.querySelector('a.model-name').click()")
    assert browser.url() == base + "/models/misc_and_strings"
    model_dom = browser.dom()
    assert "Carton with misc files and string tensors" in model_dom
    diagram = re.search(r'<img src="(/blobs/[0-9a-f]{64})" alt="diagram"', model_dom)
    assert diagram, "the @misc/diagram.png image is shown"
    assert browser.evaluate(
        "Promise.all([...document.images].filter(i => i.alt === 'diagram')"
        ".map(i => i.decode().then(() => i.naturalWidth)))"
    ) == [4], "the description image loads (a 4x4 PNG)"
    # the copy button is enabled by the small script
    assert browser.evaluate("!document.querySelector('button.copy').hidden") is True

    # "download": follow the links' hrefs from the rendered DOM
    slim = re.search(r'<a class="button" href="([^"]+)"[^>]*>Download slim', model_dom)
    full = re.search(r'<a class="button button-ghost" href="([^"]+)"[^>]*>Download full', model_dom)
    assert slim and full
    expected = pushed["misc_and_strings"]
    assert expected == manifest_sha256(fixture_carton("03"))
    for href in (slim.group(1), full.group(1)):
        r = httpx.get(urljoin(base, html.unescape(href)), timeout=60)
        assert r.status_code == 200, r.text[:500]
        with zipfile.ZipFile(io.BytesIO(r.content)) as z:
            assert hashlib.sha256(z.read("MANIFEST")).hexdigest() == expected
            if "form=full" in href:
                assert "LINKS" not in z.namelist()

    # what each version shares with the one before it, and what chunk dedup saves
    browser.goto(base + "/models/clip-image-embedder")
    dedup = browser.evaluate("document.querySelector('dd.dedup').innerText")
    assert re.match(r"v2 shares (>99|\d\d)% of its bytes with v1 \(", dedup), dedup
    browser.goto(base + "/models/tinyllama-chat")
    shares = browser.evaluate(
        "[...document.querySelectorAll('.version-share')].map(e => e.innerText)"
    )
    previous = [re.fullmatch(r"shares (?:>99|\d+)% with v(\d)", s) for s in shares]
    assert [m.group(1) if m else s for m, s in zip(previous, shares, strict=True)] == ["2", "1"]
    browser.goto(base + "/stats")
    levels = browser.evaluate("document.querySelector('.dedup-levels').innerText")
    saved = re.search(r"([\d.]+) (\w+) saved beyond that by chunk dedup", levels)
    assert saved and float(saved.group(1)) > 0 and saved.group(2) == "MiB", levels

    # screenshots at laptop and phone widths; pages never scroll sideways, and nothing in
    # them does either: long hashes and the load-by-URL snippet wrap inside their boxes
    shots = tmp_path / "screenshots"
    shots.mkdir()
    pages = {"listing": "/", "model": "/models/clip-image-embedder", "stats": "/stats"}
    carton_page = f"/cartons/{pushed['clip-image-embedder']}"
    taken = []
    for size, metrics in SIZES.items():
        browser.viewport(*metrics)
        for name, path in [*pages.items(), ("carton", carton_page)]:
            browser.goto(base + path)
            width = browser.evaluate("document.documentElement.scrollWidth")
            assert width <= metrics[0], f"{path} is {width}px wide at {size} width"
            assert browser.evaluate(OVERFLOWING) == [], f"{path} at {size} width"
            if name in pages:
                taken.append(browser.screenshot(shots / f"{name}-{size}.png"))
        browser.goto(base + carton_page)
        assert browser.evaluate(SNIPPET_TEXT) == (
            "import cartonml as carton\n"
            f'model = await carton.load("{base}/cartons/{pushed["clip-image-embedder"]}.carton")'
        ), "the copied snippet is the code, whatever its wrapping"
        # each line of code starts at the left edge; only continuations are indented
        lefts = browser.evaluate(
            "[...document.querySelectorAll('#snippet .code-line')]"
            ".map(l => Math.round(l.getClientRects()[0].left))"
        )
        assert len(set(lefts)) == 1, lefts
        crumbs = browser.evaluate("document.querySelector('.crumbs').innerText")
        assert "clip-image-embedder" in crumbs and "v1" in crumbs, crumbs
    if os.environ.get("REGISTRY_UPDATE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        for shot in taken:
            shutil.copy(shot, SCREENSHOTS / shot.name)
