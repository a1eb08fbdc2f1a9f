"""Peak memory of lineage's parent computation against the carton's size (issue 27).

    python -m bench.lineage_memory [--sizes 1,4,16] [--candidates 2]

For each size (GiB) a SQLite registry is given index rows directly (no bytes are
stored: lineage reads only the index): older cartons, each sharing its largest file
and a quarter of the other chunks with the new one, then the new carton; 64 MiB packs
of 1,024 chunks of 64 KiB, eight files. Each algorithm then runs in a fresh process:
``lineage.compute_parent`` and the one before it streamed (kept by the tests as
``reference_parent``). Printed: tracemalloc peak, RSS growth (peak RSS less RSS before
the call) and seconds. The registry is a temp folder, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from datetime import timedelta
from pathlib import Path

CHUNKS_PER_GIB = 16384
PACK_CHUNKS = 1024
FILES = 8


def build(data_dir: Path, gib: int, candidates: int) -> str:
    from registry.services.context import RegistryContext
    from registry.settings import Settings
    from tests.integration.lineage.index_rows import T0, Index

    ctx = RegistryContext.open(Settings(data_dir=data_dir), migrate=True)  # type: ignore[call-arg]
    rng = random.Random(gib)
    per_file = gib * CHUNKS_PER_GIB // FILES // PACK_CHUNKS  # packs per file

    def packs(n: int) -> list[int]:
        out = []
        for _ in range(n):
            with ctx.transaction() as session:
                entries = [(rng.randbytes(32), 65536) for _ in range(PACK_CHUNKS)]
                out.append(Index(session, rng).pack(entries))
        return out

    def file(pack_ids: list[int]) -> str:
        with ctx.transaction() as session:
            index = Index(session, rng)
            index.tables.update({p: [(b"", 65536)] * PACK_CHUNKS for p in pack_ids})
            return index.chunked_file([(p, 0, PACK_CHUNKS) for p in pack_ids])

    mine = [packs(per_file) for _ in range(FILES)]
    my_files = [file(p) for p in mine]
    for c in range(candidates):
        theirs = {"f0": my_files[0]}
        for i, my_packs in enumerate(mine[1:], 1):  # a quarter of each file's packs shared
            cut = len(my_packs) // 4
            theirs[f"f{i}"] = file(my_packs[:cut] + packs(len(my_packs) - cut))
        with ctx.transaction() as session:
            Index(session, rng).carton(theirs, T0 + timedelta(seconds=c))
    with ctx.transaction() as session:
        files = {f"f{i}": sha for i, sha in enumerate(my_files)}
        manifest = Index(session, rng).carton(files, T0 + timedelta(days=1))
    ctx.close()
    return manifest


def measure(data_dir: Path, manifest: str, algorithm: str) -> dict[str, float]:
    import psutil

    from registry.services import lineage
    from registry.services.context import RegistryContext
    from registry.settings import Settings
    from tests.integration.lineage.index_rows import reference_parent

    fn = lineage.compute_parent if algorithm == "streamed" else reference_parent
    ctx = RegistryContext.open(Settings(data_dir=data_dir, migrate_on_start=False))  # type: ignore[call-arg]
    with ctx.sessions() as session:
        fn(session, manifest)  # warm: imports, the database's page cache
        rss = psutil.Process().memory_info().rss
        tracemalloc.start()
        start = time.perf_counter()
        result = fn(session, manifest)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "tracemalloc_peak_mib": peak / 2**20,
        "rss_growth_mib": max(0, max_rss - rss) / 2**20,
        "seconds_traced": seconds,
        "parent_found": result[0] is not None,
        "shared": result[1],
        "total": result[2],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,4")
    parser.add_argument("--candidates", type=int, default=2)
    parser.add_argument("--measure", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(Path(args.measure[0]), args.measure[1], args.measure[2])))
        return
    for gib in [int(s) for s in args.sizes.split(",")]:
        data_dir = Path(tempfile.mkdtemp(prefix="lineage-memory-"))
        try:
            manifest = build(data_dir, gib, args.candidates)
            for algorithm in ("whole-lists", "streamed"):
                out = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "bench.lineage_memory",
                        "--measure",
                        str(data_dir),
                        manifest,
                        algorithm,
                    ],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                figures = json.loads(out.strip().splitlines()[-1])
                print(json.dumps({"gib": gib, "algorithm": algorithm, **figures}), flush=True)
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
