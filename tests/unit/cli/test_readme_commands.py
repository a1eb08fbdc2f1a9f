"""The README's command table names every verb the parser has (issue 26)."""

from __future__ import annotations

import argparse
import re

from registry.cli import build_parser
from tests.conftest import REPO_ROOT


def verbs() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


def test_the_command_table_covers_every_verb():
    readme = (REPO_ROOT / "README.md").read_text()
    table = readme.split("### Commands", 1)[1].split("\n\n", 2)[1]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    first_cells = " ".join(row.split(" | ")[0] for row in rows)
    named = set(re.findall(r"`([a-z][a-z-]*)", first_cells))
    assert verbs() - named == set()
