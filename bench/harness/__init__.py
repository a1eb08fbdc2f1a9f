"""What every figure stands on: data, servers, HTTP and load clients, reference rates.

Everything here is bounded: every wait has a deadline, every loop a count, and
every process started is tracked so it can be stopped at exit. Imports nothing
from ``bench.figures`` or ``bench.report``. The units and paths all of bench
uses are defined here, once.
"""

from pathlib import Path

MiB = 1 << 20
GiB = 1 << 30
CHUNK = MiB  # read/write size everywhere in the bench
REPO = Path(__file__).resolve().parents[2]
VENV_BIN = REPO / ".venv" / "bin"
PY = str(VENV_BIN / "python")
