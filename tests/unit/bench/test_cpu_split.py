"""The benchmark's perf split: ``perf report`` lines read as CPU-seconds per library."""

import pytest

from bench.figures.cpu_split import OTHER, PERF_HZ, markdown, seconds_by_library

# Lines as `perf report --stdio --no-children --sort dso -n` prints them (2026-11-28).
REPORT = """\
# Total Lost Samples: 0
#
# Samples: 3K of event 'cpu-clock:ppp'
# Event count (approx.): 3246243243
#
# Overhead       Samples  Shared Object
# ........  ............  ..............................................
#
    29.23%           999  [kernel.kallsyms]
    24.76%          1998  libcrypto.so.3
    13.64%           443  libpython3.11.so.1.0
     9.79%           318  fastcdc.cpython-311-x86_64-linux-gnu.so
     2.03%            66  isal_zlib.cpython-311-x86_64-linux-gnu.so
     0.62%            20  loop.cpython-311-x86_64-linux-gnu.so
     0.06%             2  [vdso]
"""


def test_samples_become_cpu_seconds_per_library():
    seconds = seconds_by_library(REPORT)
    assert seconds["sha256 of every file (OpenSSL)"] == 2.0
    assert seconds["kernel: socket receive, pack and database writes, scheduling"] == 1.0
    assert seconds["Python interpreter"] == 443 / PERF_HZ
    assert seconds["FastCDC cutting (pyfastcdc)"] == 318 / PERF_HZ
    assert seconds["CRC-32 of every member (ISA-L)"] == 66 / PERF_HZ
    assert seconds[OTHER] == 22 / PERF_HZ  # uvloop and the vDSO: neither listed
    assert "BLAKE3 chunk names (blake3)" not in seconds  # no line, no entry
    assert sum(seconds.values()) == pytest.approx((999 + 1998 + 443 + 318 + 66 + 20 + 2) / PERF_HZ)


def test_the_table_is_per_gib_and_says_when_there_is_nothing(tmp_path):
    table = markdown(seconds_by_library(REPORT), gib=2.0, wall=3.0, log=tmp_path / "perf.log")
    assert "| sha256 of every file (OpenSSL) | 1.00 | 52 % |" in table  # 1998 of 3846
    log = tmp_path / "perf.log"
    log.write_text("perf: Permission denied")
    assert "Permission denied" in markdown({}, gib=1.0, wall=1.0, log=log)
