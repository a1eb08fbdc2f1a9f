"""No module under ``registry/`` grows past ``MAX_LINES`` without saying why at its top.

The convention: a module longer than ``MAX_LINES`` lines carries, in its module
docstring, a line that starts with ``Long because`` and gives the reason it is one
module (for example: one state machine that splitting would scatter). Anything else
over the limit is a module doing several jobs: split it by job instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

import registry

MAX_LINES = 400
REASON = "Long because"


def has_written_reason(source: str) -> bool:
    docstring = ast.get_docstring(ast.parse(source)) or ""
    return any(line.strip().startswith(REASON) for line in docstring.splitlines())


def test_a_reason_is_a_docstring_line_starting_with_long_because():
    assert has_written_reason('"""Codec.\n\nLong because one state machine."""\n')
    assert not has_written_reason('"""Codec, long because of a state machine."""\n')
    assert not has_written_reason("# Long because of a state machine\nx = 1\n")


def test_long_modules_say_why():
    package = Path(registry.__file__).parent
    unexplained = []
    for path in sorted(package.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        lines = len(source.splitlines())
        if lines > MAX_LINES and not has_written_reason(source):
            unexplained.append(f"{path.relative_to(package.parent)}: {lines} lines")
    assert unexplained == []
