"""Figures 8 and 9: chunk transfer through `carton-registry` (docs/chunk-transfer.md).

8. A fresh carton pushed by the CLI (large files cut into chunks on the client,
   only those the registry lacks sent) against the same carton pushed through
   `POST /api/v1/cartons` to a second, empty registry; the CLI pushing it again
   unchanged; and a variant whose one large file changed in one 16 MiB region:
   bytes on the wire (counting proxy) against the changed bytes, wall time against
   hashing the variant's carton file locally.
9. `pull --full` of that variant with its base in the CLI's chunk cache: bytes
   received against the changed bytes, time against the registry's own full
   carton downloaded whole.
"""

from __future__ import annotations

import contextlib
import resource
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from bench.figures.cli_push import cli_push
from bench.figures.figure import Figure
from bench.harness import MiB
from bench.harness.clients import (
    CliFailed,
    cli_run,
    httpx_download,
    push_registry,
    settle_writeback,
)
from bench.harness.data import BuiltCarton, stored_layout
from bench.harness.proxy import CountingProxy
from bench.harness.rates import sha256_file_rate
from bench.harness.servers import Server
from bench.harness.session import Bench, Fine, Scale
from bench.harness.stats import Sample, med
from bench.report.table import Section, value_row

CHANGED = 16 * MiB
SLACK = 4 * MiB
"""The chunk targets: at most 1.5× the changed bytes plus this."""


def within_target(changed: int) -> float:
    return 1.5 * changed + SLACK


def children_cpu() -> float:
    """CPU time (user + system) of this process's finished children: the CLI runs."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def manifest_of(carton: BuiltCarton) -> str:
    from registry.carton.zipread import CartonArchive

    with CartonArchive.open(carton.path) as archive:
        return archive.manifest_sha256


@contextlib.contextmanager
def empty_registry(b: Bench, name: str) -> Iterator[Server]:
    """A registry of its own with an empty store and index, on the run's backend.

    The CLI's push and its REST reference each get one: a registry already holding the
    run's earlier figures (about 9 GiB) took 17 % longer for the same fresh GiB than an
    empty one (REST, 4 alternated rounds: 3.46 against 2.95 s), and until 2026-11-28 the
    CLI pushed into the run's shared registry while the REST push had an empty one.
    """
    db = b.create_pg_db(f"bench_{name}") if b.args.backend == "postgres" else None
    server = b.start_registry(
        label=f"registry-{name}",
        data_dir=b.work / f"{name}-data",
        database_url=b.pg_url(db) if db else None,
    )
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(b.work / f"{name}-data", ignore_errors=True)
        if db:
            b.drop_pg_db(db)


def _variant(b: Bench, base: BuiltCarton, run: int) -> BuiltCarton:
    """``base`` with one 16 MiB region of one of its large files (1/8 of it) rewritten."""
    files = list(base.files)
    k = next(i for i, f in enumerate(files) if "shard-03" in f.path)
    files[k] = files[k].patched(files[k].size // 4, CHANGED, f"{b.tag}/fine{run}")
    return b.build(f"chunk-variant-{b.tag}-{run}", files)


def measure_push(b: Bench, s: Section) -> None:
    exe = b.cli_exe()
    if exe is None:
        s.na("`carton-registry` CLI not installed (.venv/bin/carton-registry missing)")
        return
    b.ensure_servers()  # the peer and shared registry stay up for the figures after
    fresh, fresh_wire, repush, var_bytes, var_time = Sample(), [], Sample(), Sample(), Sample()
    hashed = Sample()
    cpu: list[tuple[float, float, float]] = []  # registry (REST), CLI, registry (CLI push)
    try:
        with empty_registry(b, "rest") as rest, empty_registry(b, "cli") as reg:
            proxy = CountingProxy(reg.port)
            rest_proxy = CountingProxy(rest.port)  # the same path on the wire as the CLI's
            try:
                for i in range(b.scale.runs):
                    if b.left() < 120:
                        s.notes.append(f"stopped after {i} runs: time budget")
                        break
                    if b.fine is not None:
                        b.fine.base.path.unlink(missing_ok=True)
                        b.fine.variant.path.unlink(missing_ok=True)
                    base = b.build(
                        f"chunk-{b.tag}-{i}",
                        stored_layout("weights", f"{b.tag}/chunk{i}", b.scale.stored_size),
                    )
                    mib = base.size / MiB
                    cpu_rest = rest.cpu_seconds()
                    t_rest, _ = push_registry(b.client, rest_proxy.url, base.path)
                    cpu_rest = rest.cpu_seconds() - cpu_rest
                    settle_writeback()  # as push_registry does before it starts the clock
                    cpu_reg, cpu_cli = reg.cpu_seconds(), children_cpu()
                    t_cli = cli_push(b, exe, base.path, proxy)
                    cpu_reg, cpu_cli = reg.cpu_seconds() - cpu_reg, children_cpu() - cpu_cli
                    cpu.append((cpu_rest, cpu_cli, cpu_reg))
                    fresh.add(mib / t_cli, ratio=t_rest / t_cli)
                    fresh_wire.append(proxy.up / base.size)
                    t_again = cli_push(b, exe, base.path, proxy)
                    repush.add(t_again)

                    variant = _variant(b, base, i)
                    t_hash, _ = sha256_file_rate(variant.path)
                    t_var = cli_push(b, exe, variant.path, proxy)
                    var_bytes.add(proxy.up / MiB, ratio=proxy.up / CHANGED)
                    var_time.add(t_var, ratio=t_var / t_hash)
                    hashed.add(t_hash)
                    b.fine = Fine(base, variant, CHANGED)
                    b.log(
                        f"chunked push {mib:.0f} MiB: CLI {t_cli:.2f}s vs REST {t_rest:.2f}s; "
                        f"re-push {t_again:.2f}s; variant {t_var:.2f}s (hash {t_hash:.2f}s), "
                        f"{proxy.up} bytes up for {CHANGED} changed"
                    )
            finally:
                rest_proxy.close()
                proxy.close()
    except CliFailed as exc:
        s.na(str(exc))
        return
    if not fresh.values:
        s.na("time budget exhausted before the first run")
        return
    size = b.scale.stored_size // MiB
    s.rows.append(
        value_row(
            f"first push of a fresh {size} MiB carton, CLI (probed, then whole, several to a request)",
            fresh,
            "MiB/s",
            "REST push of the same carton (empty registry)",
            "≥ 1.0×",
            lambda r: r >= 1.0,
        )
    )
    s.rows.append(value_row("same: bytes on the wire / carton size", Sample(fresh_wire), "×"))
    for i, what in enumerate(
        ("REST push: the registry's", "CLI push: the CLI's", "CLI push: the registry's")
    ):
        s.rows.append(value_row(f"{what} CPU time", Sample([c[i] for c in cpu]), "s"))
    s.rows.append(
        value_row(
            f"re-push of the unchanged {size} MiB carton (CLI wall time)",
            repush,
            "s",
            "",
            "< 0.3 s",
            lambda v: v < 0.3,
            check_on="value",
        )
    )
    s.rows.append(
        value_row(
            f"variant push, one {b.scale.stored_size // 8 // MiB} MiB file changed in one "
            f"{CHANGED // MiB} MiB region: bytes on the wire",
            var_bytes,
            "MiB",
            "changed bytes",
            f"≤ 1.5× + {SLACK // MiB} MiB",
            lambda v: v * MiB <= within_target(CHANGED),
            check_on="value",
        )
    )
    s.rows.append(
        value_row(
            "variant push wall time",
            var_time,
            "s",
            "sha256 of the carton file",
            "≤ 2×",
            lambda r: r <= 2.0,
        )
    )
    s.rows.append(value_row("(ref.) read + sha256 of the variant carton file", hashed, "s"))
    s.notes.append(
        "Fresh bytes every run. The CLI sends each fresh Stored file whole as a cut upload "
        "(cut by FastCDC in the CLI, named and hashed by the registry, which does not cut it "
        "again; since 2026-11-28, docs/chunk-transfer.md): the first at once, cut as it is "
        "sent, the others several to a request (`POST /api/v1/blobs`, up to 256 MiB each; "
        "since the tenth session). "
        "The CLI and the REST reference each push into a registry "
        "of their own that starts empty (same backend; before 2026-11-28 the CLI pushed "
        "into the run's shared registry, which by then held about 9 GiB of the earlier "
        "figures, and that alone costs a push about 17 % here), so both store every byte; both "
        "pushes go through a counting TCP proxy in the benchmark's process (the same path on "
        "the wire, and the same relaying cost on the shared cores), which relays each write "
        "at once (TCP_NODELAY, as nginx and HAProxy do; before 2026-11-28 it did not, and "
        "each of the CLI's small requests waited about 40 ms for a delayed ACK). Bytes "
        "on the wire are what the CLI sent through a counting TCP proxy (headers, chunk "
        "lists and JSON included). The re-push follows a CLI push of the same file, which "
        "the CLI remembers as verified."
    )
    s.facts.update(
        chunk_fresh_ratio=med(fresh.ratios),
        chunk_cpu_rest=med([c[0] for c in cpu]),
        chunk_cpu_cli=med([c[1] for c in cpu]),
        chunk_cpu_reg=med([c[2] for c in cpu]),
        chunk_repush_s=med(repush.values),
        chunk_variant_mib=med(var_bytes.values),
        chunk_variant_time_ratio=med(var_time.ratios),
        chunk_variant_hash_s=med(hashed.values),
    )


def _pull_full(b: Bench, exe: Path, manifest: str, out: Path, proxy: CountingProxy) -> float:
    proxy.reset()
    dt, _ = cli_run(
        exe, ["pull", manifest, "--full", "-o", str(out), "--url", proxy.url], b.cli_env()
    )
    time.sleep(0.2)  # let the proxy's pumps count the last bytes
    out.unlink(missing_ok=True)
    return dt


def measure_pull(b: Bench, s: Section) -> None:
    exe = b.cli_exe()
    if exe is None or b.fine is None:
        s.na("no variant pushed in figure 8")
        return
    fine = b.fine
    reg, _peer = b.ensure_servers()
    base, variant = manifest_of(fine.base), manifest_of(fine.variant)
    proxy = CountingProxy(reg.port)
    cold, warm, down, whole = Sample(), Sample(), Sample(), Sample()
    try:
        # Figure 8 pushes into registries of its own, gone once it ends: push both here
        # (not timed), as their users would have, before pulling them back.
        for carton in (fine.base, fine.variant):
            cli_push(b, exe, carton.path, proxy)
        for i in range(b.scale.runs):
            if b.left() < 60:
                s.notes.append(f"stopped after {i} runs: time budget")
                break
            shutil.rmtree(b.cli_cache / "carton-registry" / "chunks", ignore_errors=True)
            t_cold = _pull_full(b, exe, base, b.work / "pulled-base.carton", proxy)
            t_warm = _pull_full(b, exe, variant, b.work / "pulled-variant.carton", proxy)
            t_whole, _ = httpx_download(b.client, f"{reg.url}/cartons/{variant}.carton?form=full")
            cold.add(t_cold)
            warm.add(t_warm, ratio=t_whole / t_warm)
            down.add(proxy.down / MiB, ratio=proxy.down / fine.changed)
            whole.add(t_whole)
            b.log(
                f"pull --full: base (cold cache) {t_cold:.2f}s, variant (warm) {t_warm:.2f}s "
                f"with {proxy.down} bytes down; ?form=full {t_whole:.2f}s"
            )
    except CliFailed as exc:
        s.na(str(exc))
        return
    finally:
        proxy.close()
        fine.base.path.unlink(missing_ok=True)
        fine.variant.path.unlink(missing_ok=True)
    if not down.values:
        s.na("time budget")
        return
    s.rows.append(
        value_row(
            "`pull --full` of the variant, base in the chunk cache: bytes received",
            down,
            "MiB",
            "changed bytes",
            f"≤ 1.5× + {SLACK // MiB} MiB",
            lambda v: v * MiB <= within_target(fine.changed),
            check_on="value",
        )
    )
    s.rows.append(
        value_row(
            "same: wall time", warm, "s", "whole `?form=full` download (httpx, body discarded)"
        )
    )
    s.rows.append(value_row("`pull --full` of the base, empty chunk cache: wall time", cold, "s"))
    s.rows.append(value_row("(ref.) `?form=full` of the variant, whole (httpx)", whole, "s"))
    s.notes.append(
        "The CLI builds the full carton from the slim one, taking the chunks its cache holds "
        "and fetching the rest by ranged `GET /blobs/{sha256}`; every chunk is checked by "
        "BLAKE3 and every file by sha256. Bytes received are counted by a TCP proxy (the slim "
        "carton, chunk lists and headers included). The cache is emptied before each run's "
        "cold pull of the base."
    )
    s.facts.update(
        chunk_pull_mib=med(down.values),
        chunk_pull_warm_s=med(warm.values),
        chunk_pull_whole_s=med(whole.values),
    )


def _push_title(scale: Scale) -> str:
    return (
        f"8. Chunked push with `carton-registry push` ({scale.stored_size // MiB} MiB carton): "
        "fresh, unchanged, a fine-tune"
    )


CHUNK_PUSH = Figure("chunkpush", _push_title, measure_push)
CHUNK_PULL = Figure(
    "chunkpull",
    "9. `carton-registry pull --full` of a fine-tune with a warm chunk cache",
    measure_pull,
)
