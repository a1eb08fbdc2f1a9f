"""One spelling of sizes, shares and times for the pages and the CLI."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from registry.humanize import absolute_time, human_bytes, percent, relative_time


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0%"),
        (0.004, "<1%"),
        (0.9, "<1%"),
        (1, "1%"),
        (18.4, "18%"),
        (99.2, ">99%"),
        (100, "100%"),
    ],
)
def test_percent_never_rounds_a_share_to_nothing_or_everything(value, text):
    assert percent(value) == text


def test_human_bytes():
    assert human_bytes(1023) == "1023 B"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(230 * 1024**2) == "230 MiB"
    assert human_bytes(None) == "-" and human_bytes(None, "—") == "—"


def test_times():
    now = datetime.now(UTC)
    assert relative_time(now.isoformat()) == "just now"
    assert relative_time((now - timedelta(minutes=5)).isoformat()) == "5 minutes ago"
    assert relative_time(now - timedelta(days=1, hours=2)) == "1 day ago"
    assert relative_time("2020-01-01T00:00:00").endswith("years ago")  # naive means UTC
    assert absolute_time("2026-11-22T13:43:00+00:00") == "2026-11-22 13:43 UTC"
    assert absolute_time(None) == "-" and relative_time(None, "—") == "—"
