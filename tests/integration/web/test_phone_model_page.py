"""The model page at phone and laptop widths, in headless Chromium (issue 26 item 13):
readable file paths and whole sha256 on a phone, description headings below the card
titles, file links that look like links, download buttons with their sizes."""

from __future__ import annotations

import httpx
import pytest

from registry.humanize import human_bytes
from tests.helpers import make_carton
from tests.integration.web.test_browser import SIZES, browser  # noqa: F401

pytestmark = pytest.mark.browser

DESCRIPTION = "Intro.\n\n# A big heading\n\nText.\n\n## Usage\n\nMore text.\n"
LONG_PATH = "model/encoder/layers/attention/weights_of_a_long_layer_name.bin"


TOML = (
    f'spec_version = 1\nmodel_name = "phone-model"\nmodel_description = {DESCRIPTION!r}\n'.replace(
        "'", '"'
    )
    + '[runner]\nrunner_name = "noop"\nrequired_framework_version = "*"\n'
)


def seed(base: str) -> str:
    carton = make_carton(
        {"carton.toml": TOML.encode(), LONG_PATH: b"w" * 200_000, "model/config.json": b"{}"},
        model_name=None,
        tensor_index=True,
    )
    r = httpx.post(f"{base}/api/v1/cartons", content=carton)
    assert r.status_code == 201, r.text
    return str(r.json()["manifest_sha256"])


def font_px(browser, selector: str) -> float:  # noqa: F811
    return float(
        browser.evaluate(
            f"parseFloat(getComputedStyle(document.querySelector('{selector}')).fontSize)"
        )
    )


@pytest.mark.parametrize("size", ["phone", "laptop"])
def test_the_model_page_at_phone_and_laptop_widths(live_server, browser, size):  # noqa: F811
    base = live_server.url
    sha = seed(base)
    browser.viewport(*SIZES[size])
    browser.goto(f"{base}/models/phone-model")
    assert browser.evaluate("document.documentElement.scrollWidth") <= SIZES[size][0]

    # the file path gets most of the width, and the whole sha256 shows on a phone
    path_width, table_width = browser.evaluate(
        "[document.querySelector('table.files td.path').getBoundingClientRect().width,"
        " document.querySelector('table.files').getBoundingClientRect().width]"
    )
    assert path_width >= (0.9 if size == "phone" else 0.45) * table_width, path_width
    sha_text = browser.evaluate(
        "[...document.querySelectorAll('table.files code.sha')]"
        ".map(e => e.innerText.replace(/\\s/g, ''))"
    )
    assert all(len(t) == (64 if size == "phone" else 12) for t in sha_text), sha_text
    overflowing = browser.evaluate(
        "[...document.querySelectorAll('table.files td')]"
        ".filter(e => e.scrollWidth > e.clientWidth + 1).length"
    )
    assert overflowing == 0

    # description headings are no larger than the card titles
    card_title = font_px(browser, "section.card h2")
    assert font_px(browser, ".markdown h1") <= card_title
    assert font_px(browser, ".markdown h2") <= card_title

    # file links look like links
    link = browser.evaluate(
        "(() => { const s = getComputedStyle(document.querySelector('td.path a'));"
        " return [s.textDecorationLine, s.color]; })()"
    )
    body_color = browser.evaluate("getComputedStyle(document.body).color")
    assert "underline" in link[0] and link[1] != body_color

    # the download buttons say how big each download is
    buttons = browser.evaluate(
        "[...document.querySelectorAll('.downloads a.button')].map(a => a.innerText)"
    )
    full = httpx.head(f"{base}/cartons/{sha}.carton", params={"form": "full"})
    assert len(buttons) == 2 and all("KiB" in b or " B" in b for b in buttons), buttons
    slim = httpx.head(f"{base}/cartons/{sha}.carton")
    assert buttons[0].endswith(human_bytes(int(slim.headers["content-length"]))), buttons
    assert buttons[1].endswith(human_bytes(int(full.headers["content-length"]))), buttons
