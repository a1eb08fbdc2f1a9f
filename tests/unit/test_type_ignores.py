"""Every ``# type: ignore`` under ``registry/`` names its error code and says why.

mypy checks the rest: ``warn_unused_ignores`` fails on one that no longer hides an
error, and the ``ignore-without-code`` code on one without a code. What mypy cannot
check is the reason, a comment after the ignore on the same line
(``# type: ignore[attr-defined]  # private; none public``), so a reader knows why the
checker is overruled there without digging through history.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import registry

IGNORE = re.compile(r"#\s*type:\s*ignore\b")
EXPLAINED = re.compile(r"# type: ignore\[[a-z-]+(, [a-z-]+)*\]  # \S")


def unexplained_ignores(source: str) -> list[int]:
    """Line numbers of the ignore comments in ``source`` without a code and a reason."""
    return [
        token.start[0]
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
        and IGNORE.search(token.string)
        and not EXPLAINED.match(token.string)
    ]


def test_an_ignore_needs_a_code_and_a_reason():
    assert unexplained_ignores("x = f()  # type: ignore[arg-type]  # f is untyped\n") == []
    assert unexplained_ignores("x = f()  # type: ignore[arg-type, misc]  # why\n") == []
    assert unexplained_ignores("x = f()  # type: ignore[arg-type]\n") == [1]
    assert unexplained_ignores("x = 1\nx = f()  # type: ignore  # no code\n") == [2]
    assert unexplained_ignores("x = f()  # noqa: E501  # type: ignore[misc]  # why\n") == [1]
    # Only comments count: a string that mentions an ignore is text.
    assert unexplained_ignores('x = "# type: ignore"\n') == []


def test_every_ignore_in_the_registry_says_why():
    package = Path(registry.__file__).parent
    unexplained = [
        f"{path.relative_to(package.parent)}:{line}"
        for path in sorted(package.rglob("*.py"))
        for line in unexplained_ignores(path.read_text(encoding="utf-8"))
    ]
    assert unexplained == []
