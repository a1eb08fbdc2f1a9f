"""``python -m registry.cli``: the same as the ``carton-registry`` script."""

import sys

from registry.cli import main

sys.exit(main())
