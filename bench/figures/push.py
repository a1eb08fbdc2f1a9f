"""Figure 1: push a fresh Stored and a zstd carton; the peer and this machine's limits beside it.

References: (a) read + sha256 of the same file, (b) zstd decompress + sha256,
(c) the peer receiving the same bytes as one blob, (d) a bare ASGI app on the
same uvicorn receiving them (the HTTP receive ceiling).
"""

from __future__ import annotations

from typing import Any

from bench.figures.figure import Figure
from bench.harness import MiB
from bench.harness.clients import push_peer, push_plain, push_registry
from bench.harness.data import BuiltCarton, equal_layout, stored_layout
from bench.harness.rates import sha256_file_rate, unzstd_sha_rate
from bench.harness.servers import start_receiver
from bench.harness.session import Bench, Pushed
from bench.harness.stats import Sample, med
from bench.report.table import Section, fmt, value_row


def _push_both(b: Bench, c: BuiltCarton, sha256: str) -> tuple[float, dict[str, Any], float]:
    """(registry seconds, its answer, peer seconds) for the same file, registry first."""
    assert b.reg and b.peer  # started by measure()
    t_reg, resp = push_registry(b.client, b.reg.url, c.path)
    t_peer = push_peer(b.client, b.peer.url, c.path, sha256)
    return t_reg, resp, t_peer


def _stored(b: Bench, s: Section) -> bool:
    """The Stored carton, fresh every run; the last one stays as ``b.pushed``."""
    reg_s, peer_s, hashlim = Sample(), Sample(), Sample()
    peer_ratios: list[float] = []
    for i in range(b.scale.runs):
        if b.left() < 120:
            s.notes.append(f"stopped after {i} runs: time budget")
            break
        c = b.build(
            f"stored-{b.tag}-{i}",
            stored_layout("weights", f"{b.tag}/s{i}", b.scale.stored_size),
        )
        t_hash, hex_ = sha256_file_rate(c.path)
        mib = c.size / MiB
        t_reg, resp, t_peer = _push_both(b, c, hex_)
        if resp.get("bytes_new") != resp.get("bytes_total"):
            s.notes.append(
                f"run {i}: push deduplicated {resp.get('bytes_deduplicated')} bytes (expected 0)"
            )
        b.log(
            f"push stored {mib:.0f} MiB: registry {t_reg:.2f}s, peer {t_peer:.2f}s, sha256 {t_hash:.2f}s"
        )
        hashlim.add(mib / t_hash)
        reg_s.add(mib / t_reg, ratio=(mib / t_reg) / (mib / t_hash))
        peer_s.add(mib / t_peer)
        peer_ratios.append((mib / t_reg) / (mib / t_peer))
        if b.pushed is not None:
            b.pushed.carton.path.unlink(missing_ok=True)
        b.pushed = Pushed(c, t_reg, hex_, resp["manifest_sha256"])
    if not reg_s.values:
        s.na("time budget exhausted before the first run")
        return False
    label = f"{b.scale.stored_size // MiB} MiB carton, Stored members"
    s.rows.append(
        value_row(
            f"registry push, {label}",
            reg_s,
            "MiB/s",
            "sha256 limit (a)",
            "≥ 0.6×",
            lambda r: r >= 0.6,
        )
    )
    s.rows.append(
        value_row(
            f"registry push, {label}",
            Sample(reg_s.values, peer_ratios),
            "MiB/s",
            "peer push (c)",
            "≥ 2×",
            lambda r: r >= 2.0,
        )
    )
    s.rows.append(
        value_row("(a) read + hashlib.sha256 of the same file, same process", hashlim, "MiB/s")
    )
    s.rows.append(
        value_row(
            "(c) peer: same bytes as one blob (POST uploads/ + PUT ?digest=)", peer_s, "MiB/s"
        )
    )
    s.facts.update(
        push_stored_runs=list(reg_s.values),
        push_peer_runs=list(peer_s.values),
        push_stored=med(reg_s.values),
        push_hash=med(hashlim.values),
        push_peer=med(peer_s.values),
        push_ratio_hash=med(reg_s.ratios),
        push_ratio_peer=med(peer_ratios),
    )
    return True


def _receive_ceiling(b: Bench, s: Section) -> None:
    """(d): the same bytes, same client, to a bare ASGI app on the same uvicorn."""
    if b.pushed is None or b.left() <= 60:
        return
    path = b.pushed.carton.path
    mib = b.pushed.carton.size / MiB
    recv_file, recv_discard = Sample(), Sample()
    recv = start_receiver(b.work, b.logs / "receiver.log")
    try:
        for _ in range(b.scale.runs):
            recv_file.add(mib / push_plain(b.client, recv.url + "/file", path))
            recv_discard.add(mib / push_plain(b.client, recv.url + "/discard", path))
    finally:
        recv.stop()
    s.rows.append(
        value_row(
            "(d) bare ASGI app on the same uvicorn: receive + write to a file", recv_file, "MiB/s"
        )
    )
    s.rows.append(
        value_row("(d) bare ASGI app on the same uvicorn: receive only", recv_discard, "MiB/s")
    )
    s.facts.update(push_recv_file=med(recv_file.values), push_recv_discard=med(recv_discard.values))


def _zstd(b: Bench, s: Section) -> None:
    """A carton of compressible content in zstd-3 members, fresh every run."""
    content = b.scale.zstd_content
    z_reg, z_lim, z_peer = Sample(), Sample(), Sample()
    peer_ratios: list[float] = []
    for i in range(b.scale.runs):
        if b.left() < 90:
            s.notes.append(f"zstd: stopped after {i} runs: time budget")
            break
        files = equal_layout("weights", f"{b.tag}/z{i}", content, 8, compressible=True)
        c = b.build(f"zstd-{b.tag}-{i}", files, zstd=True)
        mib = c.size / MiB
        t_lim = unzstd_sha_rate(c.path)
        _, hex_ = sha256_file_rate(c.path)
        t_reg, _resp, t_peer = _push_both(b, c, hex_)
        b.log(
            f"push zstd {mib:.0f} MiB: registry {t_reg:.2f}s, peer {t_peer:.2f}s, unzstd+sha {t_lim:.2f}s"
        )
        z_lim.add(mib / t_lim)
        z_reg.add(mib / t_reg, ratio=t_lim / t_reg)
        z_peer.add(mib / t_peer)
        peer_ratios.append(t_peer / t_reg)
        c.path.unlink(missing_ok=True)
        s.facts["zstd_ratio"] = c.size / content
    if not z_reg.values:
        return
    label = f"{fmt(content * s.facts['zstd_ratio'] / MiB)} MiB carton, zstd-3 members ({content // MiB} MiB inside)"
    s.rows.append(
        value_row(
            f"registry push, {label}",
            z_reg,
            "MiB/s (carton bytes)",
            "unzstd + sha256 limit (b)",
            "≥ 0.7×",
            lambda r: r >= 0.7,
        )
    )
    s.rows.append(
        value_row(
            f"registry push, {label}", Sample(z_reg.values, peer_ratios), "MiB/s", "peer push (c)"
        )
    )
    s.rows.append(
        value_row(
            "(b) zstd stream-decompress + sha256, same process", z_lim, "MiB/s (carton bytes)"
        )
    )
    s.rows.append(value_row("(c) peer: same bytes as one blob", z_peer, "MiB/s"))
    s.facts.update(
        push_zstd=med(z_reg.values),
        push_zstd_lim=med(z_lim.values),
        push_zstd_ratio=med(z_reg.ratios),
    )


def measure(b: Bench, s: Section) -> None:
    b.ensure_servers()
    s.notes.append(
        "Every timed push, ours and the peer's, starts after `os.sync()`, so none pays for "
        "the writeback of the upload before it (the peer does not fsync; we fsync each blob)."
    )
    if not _stored(b, s):
        return
    _receive_ceiling(b, s)
    _zstd(b, s)
    s.notes.append(
        "Fresh bytes every run (a new seed per run: nothing deduplicates, `bytes_new` = "
        "`bytes_total`). Client and servers share the machine's cores; the peer gets the "
        "same carton file from the same httpx client right after the registry."
    )


PUSH = Figure("push", "1. Push through `POST /api/v1/cartons` (httpx, body streamed)", measure)
