"""Figure 1: push a fresh Stored and a zstd carton; the peer and this machine's limits beside it.

Targets (issue 27, ratios measured in the same run): the Stored push ≥ 2× the peer
and ≥ 0.5× the single-pass limit (e); the zstd push ≥ 0.5× the decompress +
single-pass limit (f). References: (e) read + sha256 + FastCDC + BLAKE3 of the same
file, one thread, in this process: everything a push must compute per byte; (f) the
same over every member's content, zstd members stream-decompressed; (a) read +
sha256 and (b) zstd decompress + sha256 (the earlier targets' references, kept for
comparison); (c) the peer receiving the same bytes as one blob; (d) a bare ASGI app
on the same uvicorn receiving them (the HTTP receive ceiling).

Stored cartons come in two shapes: sizes and CRCs in the local headers (the
reference packer's, the headline) and in data descriptors after each member (our
stream writer's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.figures.figure import Figure
from bench.harness import MiB
from bench.harness.clients import push_peer, push_plain, push_registry
from bench.harness.data import BuiltCarton, equal_layout, stored_layout
from bench.harness.rates import (
    sha256_file_rate,
    single_pass_seconds,
    unzstd_sha_rate,
    unzstd_single_pass_seconds,
    warm,
)
from bench.harness.servers import start_receiver
from bench.harness.session import Bench, Pushed
from bench.harness.stats import Sample, med
from bench.report.table import Section, fmt, value_row

SHAPES = {
    "sized": "sizes and CRCs in the local headers (reference packer's shape)",
    "descriptors": "data descriptors (stream writer's shape)",
}


def _push_both(b: Bench, c: BuiltCarton, sha256: str) -> tuple[float, dict[str, Any], float]:
    """(registry seconds, its answer, peer seconds) for the same file, registry first."""
    assert b.reg and b.peer  # started by measure()
    t_reg, resp = push_registry(b.client, b.reg.url, c.path)
    t_peer = push_peer(b.client, b.peer.url, c.path, sha256)
    return t_reg, resp, t_peer


@dataclass
class _Shape:
    """One Stored shape's runs: the registry's rate and each reference's, per run."""

    reg: list[float] = field(default_factory=list)  # MiB/s
    single: list[float] = field(default_factory=list)  # (e) MiB/s
    sha: list[float] = field(default_factory=list)  # (a) MiB/s
    peer: list[float] = field(default_factory=list)  # (c) MiB/s

    def vs(self, ref: list[float]) -> Sample:
        """The registry's rates, each run's ratio to ``ref``'s rate in that run."""
        return Sample(list(self.reg), [r / x for r, x in zip(self.reg, ref, strict=True)])


def _stored_run(b: Bench, s: Section, i: int, shape: str, runs: _Shape) -> None:
    """Build a fresh carton of ``shape``, time the references on it, push it to both."""
    c = b.build(
        f"stored-{shape}-{b.tag}-{i}",
        stored_layout("weights", f"{b.tag}/{shape}{i}", b.scale.stored_size),
        sized=shape == "sized",
    )
    warm(c.path)
    t_single = single_pass_seconds(c.path)
    t_hash, hex_ = sha256_file_rate(c.path)
    mib = c.size / MiB
    t_reg, resp, t_peer = _push_both(b, c, hex_)
    if resp.get("bytes_new") != resp.get("bytes_total"):
        s.notes.append(
            f"run {i} ({shape}): push deduplicated {resp.get('bytes_deduplicated')} bytes "
            "(expected 0)"
        )
    b.log(
        f"push stored ({shape}) {mib:.0f} MiB: registry {t_reg:.2f}s, peer {t_peer:.2f}s, "
        f"single pass {t_single:.2f}s, sha256 {t_hash:.2f}s"
    )
    runs.reg.append(mib / t_reg)
    runs.single.append(mib / t_single)
    runs.sha.append(mib / t_hash)
    runs.peer.append(mib / t_peer)
    if shape != "sized":
        c.path.unlink(missing_ok=True)
        return
    if b.pushed is not None:
        b.pushed.carton.path.unlink(missing_ok=True)
    b.pushed = Pushed(c, t_reg, hex_, resp["manifest_sha256"])


def _stored(b: Bench, s: Section) -> bool:
    """Both Stored shapes, fresh every run (alternating which goes first); the last carton of
    the reference packer's shape stays as ``b.pushed``."""
    shapes = {k: _Shape() for k in SHAPES}
    stopped = False
    for i in range(b.scale.runs):
        for shape in list(SHAPES) if i % 2 == 0 else list(reversed(SHAPES)):
            if b.left() < 120:
                s.notes.append(f"stopped in run {i + 1}, before its {shape} carton: time budget")
                stopped = True
                break
            _stored_run(b, s, i, shape, shapes[shape])
        if stopped:
            break
    head, desc = shapes["sized"], shapes["descriptors"]
    if not head.reg:
        s.na("time budget exhausted before the first run")
        return False
    size = f"{b.scale.stored_size // MiB} MiB carton, Stored members"
    label = f"registry push, {size}, {SHAPES['sized']}"
    single_ref = "single-pass limit (e)"
    s.rows.append(
        value_row(label, head.vs(head.single), "MiB/s", single_ref, "≥ 0.5×", lambda r: r >= 0.5)
    )
    s.rows.append(
        value_row(label, head.vs(head.peer), "MiB/s", "peer push (c)", "≥ 2×", lambda r: r >= 2.0)
    )
    s.rows.append(value_row(label, head.vs(head.sha), "MiB/s", "sha256 (a)"))
    if desc.reg:
        dlabel = f"registry push, {size}, {SHAPES['descriptors']}"
        s.rows.append(value_row(dlabel, desc.vs(desc.single), "MiB/s", single_ref))
        s.rows.append(value_row(dlabel, desc.vs(desc.peer), "MiB/s", "peer push (c)"))
        s.rows.append(value_row(dlabel, desc.vs(desc.sha), "MiB/s", "sha256 (a)"))
    single_all, sha_all, peer_all = (
        Sample(head.single + desc.single),
        Sample(head.sha + desc.sha),
        Sample(head.peer + desc.peer),
    )
    s.rows.append(
        value_row(
            "(e) single pass: read + sha256 + FastCDC + BLAKE3 of the same file, one thread, "
            "same process",
            single_all,
            "MiB/s",
        )
    )
    s.rows.append(
        value_row("(a) read + hashlib.sha256 of the same file, same process", sha_all, "MiB/s")
    )
    s.rows.append(
        value_row(
            "(c) peer: same bytes as one blob (POST uploads/ + PUT ?digest=)", peer_all, "MiB/s"
        )
    )
    s.notes.append(
        "Targets apply to the reference packer's shape (what users push); the stream writer's "
        "shape is shown against the same references, each ratio taken against the references "
        "measured on that very file. (e), (a), (c): every file of both shapes. Runs alternate "
        "which shape is pushed first."
    )
    s.facts.update(
        push_stored_runs=list(head.reg),
        push_peer_runs=list(head.peer),
        push_stored=med(head.reg),
        push_single=med(head.single),
        push_hash=med(head.sha),
        push_peer=med(head.peer),
        push_ratio_single=med(head.vs(head.single).ratios),
        push_ratio_hash=med(head.vs(head.sha).ratios),
        push_ratio_peer=med(head.vs(head.peer).ratios),
    )
    if desc.reg:
        s.facts.update(
            push_desc=med(desc.reg),
            push_desc_ratio_single=med(desc.vs(desc.single).ratios),
            push_desc_ratio_peer=med(desc.vs(desc.peer).ratios),
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
    z_reg, z_single, z_lim, z_peer = Sample(), Sample(), Sample(), Sample()
    for i in range(b.scale.runs):
        if b.left() < 90:
            s.notes.append(f"zstd: stopped after {i} runs: time budget")
            break
        files = equal_layout("weights", f"{b.tag}/z{i}", content, 8, compressible=True)
        c = b.build(f"zstd-{b.tag}-{i}", files, zstd=True)
        mib = c.size / MiB
        warm(c.path)
        t_single = unzstd_single_pass_seconds(c.path)
        t_lim = unzstd_sha_rate(c.path)
        _, hex_ = sha256_file_rate(c.path)
        t_reg, _resp, t_peer = _push_both(b, c, hex_)
        b.log(
            f"push zstd {mib:.0f} MiB: registry {t_reg:.2f}s, peer {t_peer:.2f}s, "
            f"unzstd+single pass {t_single:.2f}s, unzstd+sha {t_lim:.2f}s"
        )
        z_single.add(mib / t_single)
        z_lim.add(mib / t_lim)
        z_reg.add(mib / t_reg)
        z_peer.add(mib / t_peer)
        c.path.unlink(missing_ok=True)
        s.facts["zstd_ratio"] = c.size / content
    if not z_reg.values:
        return

    def vs(ref: Sample) -> Sample:
        return Sample(z_reg.values, [r / x for r, x in zip(z_reg.values, ref.values, strict=True)])

    label = (
        f"registry push, {fmt(content * s.facts['zstd_ratio'] / MiB)} MiB carton, zstd-3 "
        f"members ({content // MiB} MiB inside)"
    )
    unit = "MiB/s (carton bytes)"
    s.rows.append(
        value_row(
            label,
            vs(z_single),
            unit,
            "unzstd + single-pass limit (f)",
            "≥ 0.5×",
            lambda r: r >= 0.5,
        )
    )
    s.rows.append(value_row(label, vs(z_peer), unit, "peer push (c)"))
    s.rows.append(value_row(label, vs(z_lim), unit, "unzstd + sha256 (b)"))
    s.rows.append(
        value_row(
            "(f) zstd stream-decompress + sha256 + FastCDC + BLAKE3 of every member's "
            "content, one thread, same process",
            z_single,
            unit,
        )
    )
    s.rows.append(value_row("(b) zstd stream-decompress + sha256, same process", z_lim, unit))
    s.rows.append(value_row("(c) peer: same bytes as one blob", z_peer, "MiB/s"))
    s.facts.update(
        push_zstd=med(z_reg.values),
        push_zstd_single=med(z_single.values),
        push_zstd_lim=med(z_lim.values),
        push_zstd_ratio_single=med(vs(z_single).ratios),
        push_zstd_ratio=med(vs(z_lim).ratios),
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
