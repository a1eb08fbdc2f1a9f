"""Figure 12 (opt-in, ``--only big``): a 16 GiB push and full pull in constant memory.

A Stored carton of the reference packer's shape (``--big-size``, default 16 GiB)
pushed through ``POST /api/v1/cartons`` to a fresh registry (its own data dir and
database) at serve's default worker count, then pulled whole
(``GET /cartons/{sha}.carton?form=full``, body discarded); the server tree's memory
is measured as in figure 6 (a fresh server for each, sampled while it moves the
bytes). Its data is deleted afterwards. Not in the default run: it needs about 3×
the carton's size free on disk and a few minutes.
"""

from __future__ import annotations

import shutil

from bench.figures.figure import Figure
from bench.figures.memory import default_workers, peak_rows, settle, tree_peak
from bench.harness import GiB, MiB
from bench.harness.clients import httpx_download, push_registry, unavailable
from bench.harness.data import stored_layout
from bench.harness.session import Bench
from bench.report.table import Row, Section, fmt

DISK_FACTOR = 3  # the carton, the registry's copy of it, and headroom


def _size_label(size: int) -> str:
    return f"{size / GiB:g} GiB" if size >= GiB else f"{size // MiB} MiB"


def measure(b: Bench, s: Section) -> None:
    size = b.args.big_size
    free = shutil.disk_usage(b.work).free
    if free < DISK_FACTOR * size:
        s.na(
            f"{free / GiB:.1f} GiB free under {b.work}, less than {DISK_FACTOR}× the "
            f"{_size_label(size)} carton"
        )
        return
    if b.left() < 120:
        s.na("time budget")
        return
    b.stop_servers()  # the run's servers: not needed here, and their memory freed
    data_dir = b.work / "registry-big"
    pg_db = b.create_pg_db("bench_big") if b.args.backend == "postgres" else None
    db_url = b.pg_url(pg_db) if pg_db else None  # None: SQLite in the data dir
    label = _size_label(size)
    c = b.build(f"big-{b.tag}", stored_layout("weights", f"{b.tag}/big", size), sized=True)
    workers = default_workers()
    try:
        reg = b.start_registry(
            workers=None, label="registry-big-push", data_dir=data_dir, database_url=db_url
        )
        settle(reg)
        (t_push, resp), push = tree_peak(reg, lambda r: push_registry(b.client, r.url, c.path))
        b.log(f"big push {label}: {t_push:.1f}s, tree peak {push.hwm_sum / MiB:.0f} MiB")
        if resp.get("bytes_new") != resp.get("bytes_total"):
            s.notes.append(f"push deduplicated {resp.get('bytes_deduplicated')} bytes (expected 0)")
        carton_size = c.size
        c.path.unlink(missing_ok=True)  # disk for the pull's reads; not needed any more
        reg = b.start_registry(
            workers=None, label="registry-big-pull", data_dir=data_dir, database_url=db_url
        )
        settle(reg)
        url = f"{reg.url}/cartons/{resp['manifest_sha256']}.carton?form=full"
        why = unavailable(b.client, "HEAD", url)
        pull = None
        t_pull, n_pull = 0.0, 0
        if why is None:
            (t_pull, n_pull), pull = tree_peak(reg, lambda r: httpx_download(b.client, url))
            b.log(f"big pull {label}: {t_pull:.1f}s, tree peak {pull.hwm_sum / MiB:.0f} MiB")
        else:
            reg.stop()
    finally:
        c.path.unlink(missing_ok=True)
        shutil.rmtree(data_dir, ignore_errors=True)
        if pg_db:
            b.drop_pg_db(pg_db)
    s.rows.append(
        Row(
            f"registry push, {label} carton, Stored members, sizes in the local headers",
            f"{fmt(carton_size / MiB / t_push)} MiB/s",
        )
    )
    s.rows += peak_rows(f"registry, push of {label}", push, None)
    if pull is None:
        s.rows.append(Row(f"registry, full pull of {label}", f"not available: {why}"))
    else:
        s.rows.append(
            Row(
                f"registry full pull (`?form=full`, {n_pull / GiB:.2f} GiB, body discarded)",
                f"{fmt(n_pull / MiB / t_pull)} MiB/s",
            )
        )
        s.rows += peak_rows(f"registry, full pull of {label}", pull, None)
    s.notes.append(
        f"A fresh registry (own data dir and database) at serve's default worker count "
        f"({workers} here), one measurement each; memory as in figure 6. Data deleted after."
    )
    s.facts.update(
        big_size=size,
        big_push=carton_size / MiB / t_push,
        big_push_tree=push.hwm_sum,
        big_pull=n_pull / MiB / t_pull if pull else None,
        big_pull_tree=pull.hwm_sum if pull else None,
    )


BIG = Figure(
    "big",
    "12. A very large carton (opt-in: `--only big`): push and full pull in constant memory",
    measure,
    opt_in=True,
)
