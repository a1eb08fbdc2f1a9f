"""``python -m registry.cli``: the same as the ``carton-registry`` script (``registry.script``:
its Ctrl-C handling, its quick exit, and httpx without its own command-line client)."""

import sys

from registry.script import main

sys.exit(main())
