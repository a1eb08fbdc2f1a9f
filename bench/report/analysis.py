"""The closing prose: per figure, the measured reason for a miss and what would reach the target.

Each function reads the merged facts of all sections (a figure's line may cite
another's numbers, e.g. the disk rate from the limits) and yields its lines;
``EXPLAINERS`` lists them in report order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from bench.harness import MiB
from bench.harness.load import CONNECTIONS
from bench.harness.session import Scale
from bench.report.table import fmt

Facts = dict[str, Any]


def push_stored(f: Facts, scale: Scale) -> Iterator[str]:
    """Push, Stored: against the single pass, the peer, the receive ceiling and the disk."""
    if "push_stored" not in f:
        return
    disk = f.get("disk_fsync")
    need_single = 0.5 * f["push_single"]
    need_peer = 2 * f["push_peer"]
    line = (
        f"**Push, Stored** ({fmt(f['push_stored'])} MiB/s; {fmt(f['push_ratio_single'], 2)}× "
        f"the single-pass limit of {fmt(f['push_single'])} MiB/s (read + sha256 + FastCDC + "
        f"BLAKE3, one thread), {fmt(f['push_ratio_peer'], 2)}× the peer's "
        f"{fmt(f['push_peer'])} MiB/s): the targets ask for ≥ {fmt(need_single)} MiB/s "
        f"(0.5× the single pass) and ≥ {fmt(need_peer)} MiB/s (2× peer)."
    )
    if "push_desc" in f:
        line += (
            f" The same layout with data descriptors (the stream writer's shape) pushed at "
            f"{fmt(f['push_desc'])} MiB/s ({fmt(f['push_desc_ratio_single'], 2)}× its "
            f"single pass, {fmt(f['push_desc_ratio_peer'], 2)}× its peer)."
        )
    if "push_recv_file" in f:
        line += (
            f" The HTTP receive alone, for scale: a bare ASGI "
            f"app on the same uvicorn, fed by the same client on the same 2 cores, receives "
            f"{fmt(f['push_recv_discard'])} MiB/s and {fmt(f['push_recv_file'])} MiB/s when "
            f"it also writes the body to a file (the registry reaches "
            f"{fmt(f['push_stored'] / f['push_recv_file'], 2)}× of the latter)."
        )
    runs, peer_runs = f.get("push_stored_runs") or [], f.get("push_peer_runs") or []
    burst = len(runs) > 1 and runs[0] > 1.5 * max(runs[1:])
    if disk and disk > f["push_stored"] * 1.5 and not burst:
        line += (
            f" The disk is not what holds it: {fmt(disk)} MiB/s write+fsync here; the time "
            "goes to CPU per byte on the shared cores: receiving the body in Python, and "
            "hashing, cutting and naming every byte (the profile below)."
        )
    elif disk:
        rng = f.get("disk_fsync_range", "")
        line += (
            f" This disk writes+fsyncs at {fmt(disk)} MiB/s (median{', ' + rng if rng else ''}; "
            "a shared VM disk, noisy), and the push writes each byte twice (spool file, then "
            "fsynced blob) where the peer writes once without fsync"
            + (
                f": below the {fmt(min(need_single, need_peer))} MiB/s the targets need, so here "
                "they need the blobs to reach the disk without a synchronous fsync per blob "
                "in the request (e.g. one `syncfs` per push) and no spool (single pass), or "
                "a faster disk."
                if disk < min(need_single, need_peer)
                else "."
            )
        )
    if burst:
        line += (
            f" Run by run, the first push into a fresh store reached {fmt(runs[0])} MiB/s "
            f"({fmt(runs[0] / peer_runs[0], 2)}× the peer's first) and the later ones "
            f"{', '.join(fmt(r) for r in runs[1:])} MiB/s, though every timed push starts "
            f"after `os.sync()` (a single 1 GiB write+fsync probe gives {fmt(disk)} MiB/s): "
            "this VM disk does not sustain its burst rate, so removing the spool write (one "
            "of the two writes of every byte) is the step that matters here."
        )
    yield line


def push_profile(f: Facts, scale: Scale) -> Iterator[str]:
    """Where the push's time goes, from the profiled push."""
    ps, pi = f.get("prof_push_s"), f.get("prof_ingest_s")
    if not (ps and pi):
        return
    ph = f.get("phases") or {}
    hs = f.get("hotspots") or []
    top = "; ".join(f"`{src or fr}` {pct:.0f} %" for fr, src, _s, pct in hs[:3])
    shares = ", ".join(f"{k.split(' (')[0]} {v[1]:.0f} %" for k, v in ph.items() if v[1] >= 1)
    yield (
        f"**Where the push time goes**: `ingest_file` in-process on the same (page-cached) "
        f"bytes into a fresh store took {pi:.1f} s; the same push over HTTP took {ps:.1f} s. "
        + (
            f"py-spy over the HTTP push, share of busy thread time: {shares}; top lines: {top}. "
            if ph
            else ""
        )
        + _cpu_split_sentence(f.get("cpu_split") or {})
        + "The push streams (each member hashed, cut, named and written as the body "
        "arrives; no spool), so what is left is CPU per byte on two shared cores: sha256, "
        "the zip's CRC-32, FastCDC and BLAKE3 over every byte, and the event loop receiving."
    )


def _cpu_split_sentence(per_gib: dict[str, float]) -> str:
    """perf's split of the server's CPU over a push, largest first (``cpu_split``)."""
    if not per_gib:
        return ""
    parts = sorted(per_gib.items(), key=lambda kv: -kv[1])
    listed = ", ".join(f"{what.split(' (')[0]} {sec:.2f}" for what, sec in parts if sec >= 0.01)
    return (
        f"perf over a second push, the server's CPU-seconds a GiB ({sum(per_gib.values()):.2f} "
        f"in all): {listed}. "
    )


def push_zstd(f: Facts, scale: Scale) -> Iterator[str]:
    """Push, zstd: against the decompress + single-pass limit."""
    if "push_zstd" not in f:
        return
    yield (
        f"**Push, zstd**: {fmt(f['push_zstd'])} MiB/s of carton bytes = "
        f"{fmt(f['push_zstd_ratio_single'], 2)}× the single-thread decompress + single-pass "
        f"limit ({fmt(f['push_zstd_single'])} MiB/s; target ≥ 0.5×; decompress + sha256 "
        f"alone: {fmt(f['push_zstd_lim'])} MiB/s). "
        + (
            "Met. "
            if f["push_zstd_ratio_single"] >= 0.5
            else "The limit (f) decompresses, hashes, cuts and names in memory; the push "
            "also receives the carton, checks each member's CRC-32 and writes the "
            "twice-as-large content into packs, on the same two cores (the profile above "
            "splits that time). "
        )
    )


def repush(f: Facts, scale: Scale) -> Iterator[str]:
    """Re-push: what a fresh CLI process costs before it sends anything."""
    if "repush_s" not in f:
        return
    tops = ", ".join(f"`{n}` {t:.2f} s" for n, t in f.get("cli_import_top", [])[:3])
    yield (
        f"**Re-push** ({f['repush_s']:.2f} s, target < 0.3 s): a fresh `carton-registry` "
        f"process costs {f['cli_floor']:.2f} s before doing anything (`--help`; bare "
        f"`python -c pass` {f.get('cli_bare', float('nan')):.2f} s; `import registry.cli` "
        f"{f.get('cli_import_total', float('nan')):.2f} s"
        + (f", heaviest: {tops}" if tops else "")
        + f"); the push itself sent {int(f['repush_wire']):,} bytes. "
        "The server's share is tens of milliseconds (two requests; indexed blobs are not "
        "read back, rows carry size and CRC), and the CLI reads only the zip's directory and "
        "MANIFEST; what remains is process start-up: the floor above, then importing what a "
        "push needs (httpx, httpcore and h11 with it, about a third of the run: "
        "`registry.client` loads each module on first use since 2026-11-25, and `--help` no "
        "longer loads httpx at all). What would reach it: a lighter HTTP client for the "
        "no-op path (stdlib `http.client`), or pushing from a long-lived process "
        "(`registry.client`)."
    )


def variant(f: Facts, scale: Scale) -> Iterator[str]:
    """Variant push: bytes on the wire against the changed bytes."""
    if "variant_ratio" not in f:
        return
    yield (
        f"**Variant push**: {fmt(f['variant_ratio'], 3)}× the changed bytes on the wire "
        f"({'met' if f['variant_ratio'] < 1.1 else 'not met'})."
    )


def pull(f: Facts, scale: Scale) -> Iterator[str]:
    """Full-carton and blob pull against the peer and the page cache."""
    for key, label, target in (("full", "Full-carton pull", 1.0), ("blob", "Blob pull", 1.2)):
        if f"pull_{key}_curl_ratio" in f:
            met = min(f[f"pull_{key}_curl_ratio"], f[f"pull_{key}_httpx_ratio"]) >= target
            yield (
                f"**{label}**: curl {fmt(f[f'pull_{key}_curl'])} MiB/s = "
                f"{fmt(f[f'pull_{key}_curl_ratio'], 2)}× the peer ({fmt(f[f'pull_{key}_peer_curl'])}), "
                f"httpx {fmt(f[f'pull_{key}_httpx'])} MiB/s = {fmt(f[f'pull_{key}_httpx_ratio'], 2)}× "
                f"the peer ({fmt(f[f'pull_{key}_peer_httpx'])}); the page cache gives "
                f"{fmt(f[f'pull_{key}_cat'])} MiB/s, so the server, not the disk, is the limit. "
                + (
                    ""
                    if met
                    else "httpx receives both servers' bytes at about the same rate: past a "
                    "GB/s the Python client, not the server, is the limit. "
                    if f[f"pull_{key}_curl_ratio"] >= target
                    else f"The target is {target}×. Blob bytes are read with `os.pread` in 1 MiB "
                    "pieces, 4 MiB per worker-thread trip; py-spy shows the event loop's socket "
                    "writes as the rest of the cost, which only zero-copy sending removes "
                    "(uvicorn has none; Granian's pathsend sends a whole file as the whole body, "
                    "which a rebuilt carton is not). Client and server share 2 cores."
                )
            )


def load(f: Facts, scale: Scale) -> Iterator[str]:
    """Under load: against `/healthz`, against the peer's HEAD, and with two workers."""
    hz = f.get("load_w1_hey_GET_healthz", {})
    rows = [
        ("slim GET", f.get("load_w1_hey_GET_carton", {})),
        ("HEAD carton", f.get("load_w1_hey_HEAD_carton", {})),
        ("HEAD blob", f.get("load_w1_hey_HEAD_blob", {})),
    ]
    if not hz:
        return
    peer = f.get("load_peer_hey_HEAD", {})
    parts = [f"`/healthz` itself {fmt(hz['rps'])} req/s, p99 {fmt(hz['p99'])} ms"]
    if peer:
        parts.append(f"the peer's HEAD {fmt(peer['rps'])} req/s, p99 {fmt(peer['p99'])} ms")
    for name, fact in rows:
        if fact:
            parts.append(
                f"{name} {fmt(fact['rps'])} req/s = {fmt(fact.get('ratio'), 2)}× `/healthz`"
                + (f", {fmt(fact['peer_ratio'], 2)}× the peer" if "peer_ratio" in fact else "")
                + f", p99 {fmt(fact['p99'])} ms"
            )
    line = "**Under load** (1 worker, hey): " + "; ".join(parts) + ". "
    line += (
        "A known carton or blob is answered from the process's memory (sizes, layouts, a "
        "slim carton's bytes), so these requests cost what `/healthz` costs: no worker thread, "
        "no database round trip; a delete, GC or fsck finding bumps a generation that every "
        "process re-reads at most every 50 ms. "
    )
    if hz.get("p99", 0) >= 20:
        line += (
            f"The p99 is over 20 ms even for `/healthz`: with {CONNECTIONS} connections on one "
            "event loop it is mostly queueing, and the load generator and other work share the "
            "2 cores (see the load average in the machine table). "
        )
    scaling = {
        name: f.get(f"load_scaling_hey_{key}")
        for name, key in (
            ("`/healthz`", "GET_healthz"),
            ("slim GET", "GET_carton"),
            ("HEAD carton", "HEAD_carton"),
            ("HEAD blob", "HEAD_blob"),
        )
    }
    if any(v is not None for v in scaling.values()):
        line += (
            "With `--workers 2`: "
            + ", ".join(f"{name} {fmt(v, 2)}×" for name, v in scaling.items() if v is not None)
            + " one worker. Two workers cannot double anything here: the machine has 2 cores "
            "and the load generator runs on them too."
        )
    yield line


def overhead(f: Facts, scale: Scale) -> Iterator[str]:
    """The middleware's share of a request."""
    if "overhead_middleware_us" in f:
        yield (
            f"**Per-request overhead**: the middleware (request id, JSON access line written by "
            f"a logging thread, metrics) costs {fmt(f['overhead_middleware_us'])} µs of CPU per "
            f"request, of {fmt(f['overhead_healthz_us'])} µs for a whole `/healthz` in-process."
        )


def servers(f: Facts, scale: Scale) -> Iterator[str]:
    """Which ASGI server, and why."""
    ratios = {k.removeprefix("servers_"): v for k, v in f.items() if k.startswith("servers_")}
    if ratios:
        yield (
            "**ASGI server**: Granian over uvicorn, same app, one worker, this run: "
            + ", ".join(f"{name.replace('_', ' ')} {fmt(v, 2)}×" for name, v in ratios.items())
            + ". On this shared 2-core machine the small-request lead moves from run to run "
            "(see the min – max in section 5b) and the full carton comes out even. `serve` "
            "keeps uvicorn as its default: it serves one worker in-process, keeps idle "
            "connections 75 s (above load balancers' usual 60 s) and handles proxy headers "
            "itself; `serve --server granian` runs the same app on Granian."
        )


def memory(f: Facts, scale: Scale) -> Iterator[str]:
    """Memory: the process tree's peak (sum of VmHWM) against the 200 MiB target."""
    if not f.get("rss_push"):
        return
    worst = max(f["rss_push"], f.get("rss_pull") or 0)
    workers = f.get("rss_workers", "?")
    yield (
        f"**Memory** (serve's default, {workers} workers; sums over the process tree): idle "
        f"{f['rss_idle'] / MiB:.0f} MiB, peak {f['rss_push'] / MiB:.0f} MiB receiving and "
        + (f"{f['rss_pull'] / MiB:.0f} MiB sending" if f.get("rss_pull") else "n/a sending")
        + f" {scale.mem_size // MiB} MiB (largest single process "
        f"{f['rss_push_max'] / MiB:.0f} MiB; peer {f['rss_peer_push'] / MiB:.0f} / "
        f"{f['rss_peer_pull'] / MiB:.0f} MiB): "
        + (
            "within 200 MiB."
            if worst < 200 * MiB
            else f"over 200 MiB by {(worst - 200 * MiB) / MiB:.0f} MiB; the idle tree is "
            f"{f['rss_idle'] / MiB:.0f} MiB of it (each process imports the app; shared "
            f"pages count once per process: the sampled summed Pss while receiving was "
            f"{f['rss_push_pss'] / MiB:.0f} MiB), the rest buffers in flight."
        )
    )


def listing(f: Facts, scale: Scale) -> Iterator[str]:
    """Listing: HTTP latency, in-process time and database time."""
    lp = {k: v for k, v in f.items() if k.startswith("listing /")}
    if not lp:
        return
    worst = max(lp.values())
    line = (
        f"**Listing** ({scale.models:,} models): HTTP p50 {fmt(min(lp.values()))}–{fmt(worst)} ms "
        f"against a 30 ms target. "
    )
    ip = f.get("listing_inproc first page")
    db = f.get("listing_db first page")
    if ip is not None and db is not None:
        line += (
            f"For the first page, in-process `catalog.list_models()` takes {fmt(ip)} ms, of "
            f"which the database executes {fmt(db)} ms (EXPLAIN ANALYZE). "
        )
        if db > 15:
            line += (
                "The query finds each model's latest version with a GROUP BY over all "
                "versions before it can LIMIT: what would reach it is a per-model "
                "`latest_version` column (or a LATERAL/`DISTINCT ON` plan driven by the "
                "name index) so a page reads ~limit rows, plus a trigram index for `q`."
            )
    yield line


def chunk_push(f: Facts, scale: Scale) -> Iterator[str]:
    """Chunked push: the CLI against REST, in CPU time on both sides."""
    if "chunk_fresh_ratio" not in f:
        return
    yield (
        f"**Chunked push**: a fresh carton through the CLI ran at "
        f"{fmt(f['chunk_fresh_ratio'], 2)}× the REST push of the same carton. CPU time: the "
        f"REST push cost the registry {fmt(f['chunk_cpu_rest'], 2)} s; the CLI push cost the "
        f"CLI {fmt(f['chunk_cpu_cli'], 2)} s (a probe of four 1 MiB windows of each large "
        "file; the registry holds none of their chunks, so each file is cut here by FastCDC "
        "and sent whole, several to a request) and the registry "
        f"{fmt(f['chunk_cpu_reg'], 2)} s (hashing each file and naming each chunk as it "
        "arrives, without cutting it again; one lease, pack session and index transaction "
        "a request, the next body on the wire while the registry finishes the one before: "
        "docs/chunk-transfer.md). A fine-tune or an "
        "interrupted push goes as the chunks the registry lacks (the variant below). "
        "Re-push: "
        f"{fmt(f['chunk_repush_s'], 3)} s, the interpreter and imports for the most part "
        "(figure 2's floor). Variant: "
        f"{fmt(f['chunk_variant_mib'])} MiB on the wire for 16 MiB changed, in "
        f"{fmt(f['chunk_variant_time_ratio'], 2)}× the time to hash the carton file "
        f"({fmt(f['chunk_variant_hash_s'], 2)} s): the process start and the round trips "
        "weigh more on a small carton."
    )


def chunk_pull(f: Facts, scale: Scale) -> Iterator[str]:
    """Pull with a warm chunk cache: bytes, and time against the whole download."""
    if "chunk_pull_mib" not in f:
        return
    yield (
        f"**Pull with a warm cache**: {fmt(f['chunk_pull_mib'])} MiB received for 16 MiB "
        f"changed, in {fmt(f['chunk_pull_warm_s'], 2)} s against "
        f"{fmt(f['chunk_pull_whole_s'], 2)} s for the whole `?form=full` over loopback: "
        "locally every byte is still read from the cache, checked (BLAKE3 per chunk, sha256 "
        "per file, the zip's CRC-32) and written, which a loopback download of a page-cached "
        "carton does not pay; the cache saves the network, not the disk."
    )


EXPLAINERS: list[Callable[[Facts, Scale], Iterator[str]]] = [
    push_stored,
    push_profile,
    push_zstd,
    repush,
    variant,
    pull,
    load,
    overhead,
    servers,
    memory,
    listing,
    chunk_push,
    chunk_pull,
]


def analysis(facts: Facts, scale: Scale) -> list[str]:
    """One line per figure that has something to say."""
    return [line for explain in EXPLAINERS for line in explain(facts, scale)]
