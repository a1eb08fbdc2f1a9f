"""Keep glibc from giving large buffers back to the kernel between one read and the next.

By default glibc maps every allocation over 128 KiB on its own and trims a freed heap top
over 256 KiB: each 256 KiB piece uvicorn reads from a socket, and each 1 MiB part of a
chunk upload the client joins, became a fresh mapping whose pages the kernel faulted in
and zeroed, then unmapped. Receiving 1 GiB cost 1.4 CPU-seconds on the test machine,
0.4 with these settings. What stays mapped is bounded: at most ``TRIM_THRESHOLD`` of
freed memory per malloc arena; buffers over ``MMAP_THRESHOLD`` are mapped as before.
"""

from __future__ import annotations

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 8 * 1024 * 1024
"""Above the largest piece we read or send at once (4 MiB pieces, 1 MiB parts)."""
TRIM_THRESHOLD = 32 * 1024 * 1024


def keep_freed_memory() -> bool:
    """Apply the thresholds; False where the C library has no ``mallopt`` (not glibc)."""
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (ImportError, OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
