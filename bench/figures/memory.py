"""Figure 6: peak RSS (VmHWM) of a fresh registry moving a large carton; the peer's beside it.

Each measurement gets a fresh process, so its VmHWM covers only that transfer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from bench.figures.figure import Figure
from bench.harness import MiB
from bench.harness.clients import (
    httpx_download,
    peer_blob_url,
    push_peer,
    push_registry,
    unavailable,
)
from bench.harness.data import equal_layout
from bench.harness.rates import sha256_file_rate
from bench.harness.servers import Server, tree_status
from bench.harness.session import Bench, Scale
from bench.report.table import Row, Section, verdict

T = TypeVar("T")
LIMIT = 200 * MiB


def _peak_rss(server: Server, transfer: Callable[[Server], T]) -> tuple[T, int]:
    """(``transfer``'s result, the server's VmHWM after it: its largest process, workers
    included); the server is stopped after."""
    try:
        result = transfer(server)
        return result, tree_status(server.pid, "VmHWM") or 0
    finally:
        server.stop()


def _row(what: str, v: int | None, peer_v: int, why: str | None = None) -> Row:
    if v is None:
        return Row(what, f"not available: {why}")
    return Row(
        what,
        f"{v / MiB:.0f} MiB",
        "",
        "peer",
        f"{v / max(peer_v, 1):.2f}×",
        "",
        "< 200 MiB",
        verdict(v < LIMIT),
    )


def measure(b: Bench, s: Section) -> None:
    if b.left() < (40 if b.scale.quick else 150):
        s.na("time budget")
        return
    b.stop_servers()
    size = b.scale.mem_size
    c = b.build(
        f"mem-{b.tag}",
        equal_layout("weights", f"{b.tag}/mem", size, size // (128 * MiB) or 1),
    )
    _, hex_ = sha256_file_rate(c.path)
    try:
        reg = b.start_registry(label="registry-mem-push")
        idle = tree_status(reg.pid, "VmRSS") or 0
        (t, resp), hwm_push = _peak_rss(reg, lambda r: push_registry(b.client, r.url, c.path))

        def pull(r: Server) -> str | None:
            url = f"{r.url}/cartons/{resp['manifest_sha256']}.carton?form=full"
            why = unavailable(b.client, "HEAD", url)
            if why is None:
                httpx_download(b.client, url)
            return why

        why, hwm = _peak_rss(b.start_registry(label="registry-mem-pull"), pull)
        hwm_pull = hwm if why is None else None
        t_ppush, p_push = _peak_rss(
            b.start_peer("peer-mem-push"), lambda p: push_peer(b.client, p.url, c.path, hex_)
        )
        _, p_pull = _peak_rss(
            b.start_peer("peer-mem-pull"),
            lambda p: httpx_download(b.client, peer_blob_url(p.url, hex_)),
        )
    finally:
        c.path.unlink(missing_ok=True)
    s.rows.append(Row("registry idle after start (VmRSS)", f"{idle / MiB:.0f} MiB"))
    s.rows.append(
        _row(
            f"registry, push of {c.size // MiB} MiB ({c.size / MiB / t:.0f} MiB/s)",
            hwm_push,
            p_push,
        )
    )
    s.rows.append(_row(f"registry, full pull of {c.size // MiB} MiB", hwm_pull, p_pull, why))
    s.rows.append(
        Row(
            f"peer, push of the same bytes ({c.size / MiB / t_ppush:.0f} MiB/s)",
            f"{p_push / MiB:.0f} MiB",
        )
    )
    s.rows.append(Row("peer, pull of the same blob", f"{p_pull / MiB:.0f} MiB"))
    s.notes.append(
        "One measurement each (a fresh process per measurement, so VmHWM covers only it)."
    )
    s.facts.update(
        rss_idle=idle,
        rss_push=hwm_push,
        rss_pull=hwm_pull,
        rss_peer_push=p_push,
        rss_peer_pull=p_pull,
    )


def _title(scale: Scale) -> str:
    return f"6. Peak RSS (VmHWM) while moving {scale.mem_size // MiB} MiB, fresh process each"


MEMORY = Figure("memory", _title, measure)
