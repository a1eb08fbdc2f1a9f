#!/usr/bin/env python3
"""Write the table of every ``REGISTRY_*`` setting into docs/operations.md.

The table is ``carton-registry settings --markdown``, made from the settings' own
fields (registry/settings.py); it goes between the two markers below, replacing what
was there. ``--check`` changes nothing and exits 1 when the file is out of date
(tests/unit/test_settings_doc.py checks the same).

Usage: .venv/bin/python scripts/settings_doc.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "operations.md"
BEGIN = "<!-- settings table: written by scripts/settings_doc.py from registry/settings.py -->"
END = "<!-- end of the settings table -->"


def updated(text: str) -> str:
    """``text`` with the table between the markers made afresh."""
    from registry.cli.settings_command import markdown_table

    head, begin, rest = text.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise SystemExit(f"{DOC}: the markers {BEGIN!r} and {END!r} are missing")
    return f"{head}{BEGIN}\n{markdown_table()}{END}{tail}"


def main(argv: list[str]) -> int:
    text = DOC.read_text(encoding="utf-8")
    fresh = updated(text)
    if "--check" in argv:
        if fresh != text:
            print(f"{DOC} is out of date: run scripts/settings_doc.py", file=sys.stderr)
            return 1
        return 0
    if fresh != text:
        DOC.write_text(fresh, encoding="utf-8")
        print(f"wrote the settings table into {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
