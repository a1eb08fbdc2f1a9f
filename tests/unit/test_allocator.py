"""keep_freed_memory: large buffers come from the heap (reused) instead of fresh mappings."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import ctypes, sys
from registry.allocator import keep_freed_memory

def in_heap(buffer):
    address = ctypes.addressof(ctypes.c_char.from_buffer(buffer))
    for line in open("/proc/self/maps"):
        if line.rstrip().endswith("[heap]"):
            start, end = (int(x, 16) for x in line.split()[0].split("-"))
            return start <= address < end
    return False

if sys.argv[1] == "tuned":
    assert keep_freed_memory()
print(in_heap(bytearray(1 << 20)))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
@pytest.mark.parametrize(("mode", "expected"), [("default", "False"), ("tuned", "True")])
def test_a_one_mib_buffer_is_mapped_on_its_own_unless_tuned(mode, expected):
    """By default glibc maps a 1 MiB buffer on its own (and unmaps it when freed: fresh
    zeroed pages for the next one); tuned, it comes from the heap, whose freed memory is
    kept for the next buffer."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == expected
