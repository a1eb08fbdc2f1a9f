"""Lineage, diff and the file viewer in headless Chromium against a live server: follow the
family's diff link, change the compared versions through the form, open files from the
files table (carton.toml, a Markdown README, an image under misc/ that must load)."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers import make_carton
from tests.integration.lineage.test_pages import PNG, README
from tests.integration.lineage.weights import RETRAINED, family
from tests.integration.web.test_browser import SIZES, browser  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.parametrize("backend", ["sqlite-fs"], indirect=True)]


def test_family_diff_and_file_viewer(live_server, browser):  # noqa: F811
    base = live_server.url
    with httpx.Client(base_url=base, timeout=60) as http:
        for version in family().values():
            files = {version.path: version.bytes(), "README.md": README, "misc/d.png": PNG}
            carton = make_carton(files, model_name="mini", stored=True)
            assert http.post("/api/v1/cartons", content=carton).status_code == 201
    browser.viewport(*SIZES["laptop"])

    browser.goto(base + "/models/mini?version=2")
    derived = browser.evaluate("document.querySelector('.derived-from').innerText")
    assert derived.startswith("mini v1 shares"), derived
    browser.submit_and_wait(
        "[...document.querySelectorAll('#family a.diff-link')]"
        ".find(a => a.href.endsWith('from=1&to=2')).click()"
    )
    assert browser.url() == base + "/models/mini/diff?from=1&to=2"
    counts = browser.evaluate("document.querySelector('.diff-counts').textContent")
    assert counts.split() == ["1", "changed", "0", "added", "0", "removed", "3", "same"]
    # exact tensors through the form
    browser.submit_and_wait(
        "const f = document.querySelector('form.compare');"
        "f.querySelector('input[name=exact]').checked = true; f.submit();"
    )
    assert "exact=true" in browser.url()
    changed = browser.evaluate(
        "[...document.querySelectorAll('table.tensors tr')]"
        ".filter(r => r.querySelector('.st-changed')).map(r => r.querySelector('code').innerText)"
    )
    assert sorted(changed) == sorted(RETRAINED)
    width = browser.evaluate("document.documentElement.scrollWidth")
    assert width <= SIZES["laptop"][0]
    browser.viewport(*SIZES["phone"])
    browser.goto(browser.url())
    assert browser.evaluate("document.documentElement.scrollWidth") <= SIZES["phone"][0]
    browser.viewport(*SIZES["laptop"])

    # the file viewer, from the model page's files table
    browser.goto(base + "/models/mini?version=1")
    browser.submit_and_wait(
        "[...document.querySelectorAll('a.view-file')]"
        ".find(a => a.innerText === 'carton.toml').click()"
    )
    assert 'model_name = "mini"' in browser.evaluate(
        "document.querySelector('.file-text').innerText"
    )
    browser.goto(base + "/models/mini?version=1")
    browser.submit_and_wait(
        "[...document.querySelectorAll('a.view-file')]"
        ".find(a => a.innerText === 'README.md').click()"
    )
    assert browser.evaluate("document.querySelector('.markdown h1').innerText") == "Mini"
    assert browser.evaluate("document.querySelectorAll('.markdown script').length") == 0
    browser.goto(base + "/models/mini?version=1")
    browser.submit_and_wait(
        "[...document.querySelectorAll('a.view-file')]"
        ".find(a => a.innerText === 'misc/d.png').click()"
    )
    assert (
        browser.evaluate(
            "document.querySelector('img.file-image').decode().then(() =>"
            " document.querySelector('img.file-image').naturalWidth)"
        )
        == 1
    ), "the image loads from its raw URL (image/png)"
