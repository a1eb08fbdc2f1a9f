"""The ``carton-registry`` script's entry point: what has to happen before ``registry.cli``
(and with it httpx) is imported, so it lives outside that package."""

from __future__ import annotations

import sys

INTERRUPTED = 130  # as registry.cli reports a Ctrl-C (128 + SIGINT)


def main() -> int:
    try:
        # httpx imports its own command-line client (click, pygments, rich's syntax
        # highlighting) whenever those are installed, as they are beside the registry
        # (uvicorn and rich bring them): a sixth of every command's start, for a client
        # we never run. A None entry makes that import fail, which httpx expects.
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # None: see above
        from registry.cli import main as run
    except KeyboardInterrupt:  # Ctrl-C while the command line loads: nothing started yet
        sys.stderr.write("interrupted\n")
        return INTERRUPTED
    return run()
