"""Figure: lineage and diff of two large models, answered from the chunk index.

A base weights file (tests/finetune.py's safetensors-like layout, ``stored_size``
bytes of tensors) and a fine-tune whose consecutive middle tensors, about 16 MiB,
are retrained, each in a Stored carton, pushed in-process (``ingest_file``) into a
fresh SQLite + filesystem registry, as ``serve`` would run them:

(a) lineage at push: the seconds the fine-tune's push spent recording its lineage
    (``PushResult.lineage_seconds``) against the whole push, per run (a fresh
    registry each run, so every push finds the base stored and nothing else);
(b) ``diff_cartons(base, fine-tune)`` cold (header tables not cached), and
    ``GET /api/v1/diff`` through the app, with the bytes of stored files it read
    (counted at the read path the headers go through) against the two headers.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace

from bench.figures.figure import Figure
from bench.harness import REPO, MiB
from bench.harness.session import Bench
from bench.harness.stats import Sample, med
from bench.report.table import Row, Section, fmt, value_row

CHANGED_BYTES = 16 * MiB


def _finetune():  # type: ignore[no-untyped-def]
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tests import finetune

    return finetune


def _variant(finetune, base):  # type: ignore[no-untyped-def]
    """Consecutive tensors from the middle of the data, about 16 MiB, with new bytes."""
    middle = len(base.tensors) // 2
    tensors, changed, i = list(base.tensors), 0, middle
    while changed < CHANGED_BYTES and i < len(tensors) - 1:
        old = tensors[i]
        tensors[i] = finetune.Tensor(
            old.name, old.dtype, (finetune.Segment(f"bench-retrained:{old.name}", 0, old.nbytes),)
        )
        changed += old.nbytes
        i += 1
    return replace(base, generation=base.generation + 1, tensors=tuple(tensors)), changed


def measure(b: Bench, s: Section) -> None:
    if b.left() < 120:
        s.na("time budget")
        return
    from litestar.testing import TestClient

    from bench.figures.chunks import _carton  # the Stored carton writer of figure 8
    from registry.app import create_app
    from registry.services import diff, weights_headers
    from registry.services.context import RegistryContext
    from registry.services.ingest import ingest_file
    from registry.settings import Settings

    finetune = _finetune()
    base = finetune.base(b.scale.stored_size, seed=7)
    tuned, changed = _variant(finetune, base)
    base_path, _ = _carton(b, "lineage-base", base)
    tuned_path, _ = _carton(b, "lineage-tuned", tuned)
    b.log(f"lineage: cartons of {base.size / MiB:.0f} MiB written, {changed / MiB:.1f} MiB changed")

    share, lineage_ms, push_s = Sample(), Sample(), Sample()
    diff_ms, http_ms, read_bytes = Sample(), Sample(), Sample()
    headers = len(base.header) + len(tuned.header)
    for run in range(b.scale.runs):
        data_dir = b.work / f"lineage-{run}"
        ctx = RegistryContext.open(Settings(data_dir=data_dir), migrate=True)
        try:
            first = ingest_file(ctx, base_path)
            second = ingest_file(ctx, tuned_path)
            share.add(100.0 * second.lineage_seconds / second.seconds)
            lineage_ms.add(second.lineage_seconds * 1000)
            push_s.add(second.seconds)

            counted = [0]
            real_read = weights_headers.read_blob

            def counting(*args, _real=real_read, _counted=counted, **kwargs):  # type: ignore[no-untyped-def]
                for piece in _real(*args, **kwargs):
                    _counted[0] += len(piece)
                    yield piece

            weights_headers.read_blob = counting  # type: ignore[assignment]
            try:
                weights_headers._TABLES.clear()
                t = time.perf_counter()
                result = diff.diff_cartons(ctx, first.manifest_sha256, second.manifest_sha256)
                diff_ms.add((time.perf_counter() - t) * 1000)
                read_bytes.add(counted[0])
            finally:
                weights_headers.read_blob = real_read  # type: ignore[assignment]
            weights_headers._TABLES.clear()
            with TestClient(create_app(ctx=ctx)) as client:
                t = time.perf_counter()
                r = client.get(
                    "/api/v1/diff",
                    params={"from": first.manifest_sha256, "to": second.manifest_sha256},
                )
                http_ms.add((time.perf_counter() - t) * 1000)
                r.raise_for_status()
            tensors = result["files"][-1]["tensors"] or []
            s.facts["lineage_changed_tensors"] = sum(t["status"] == "changed" for t in tensors)
            s.facts["lineage_tensors"] = len(tensors)
        finally:
            ctx.close()
        b.log(
            f"lineage run {run}: push {push_s.values[-1]:.2f}s, lineage "
            f"{lineage_ms.values[-1]:.1f} ms, diff {diff_ms.values[-1]:.1f} ms"
        )
    s.rows.append(
        value_row(
            "lineage at push: share of the fine-tune's push time",
            share,
            "%",
            target="< 5%",
            check=lambda v: v < 5,
            check_on="value",
        )
    )
    s.rows.append(value_row("lineage at push: time", lineage_ms, "ms"))
    s.rows.append(value_row("the fine-tune's whole push (in-process)", push_s, "s"))
    s.rows.append(
        value_row(
            "diff of the two cartons, in-process, cold",
            diff_ms,
            "ms",
            target="< 1000 ms",
            check=lambda v: v < 1000,
            check_on="value",
        )
    )
    s.rows.append(value_row("`GET /api/v1/diff` (in-process app)", http_ms, "ms"))
    read = med(read_bytes.values)
    s.rows.append(
        Row(
            "bytes of stored files the diff read",
            f"{fmt(read)} B",
            "",
            "the two safetensors headers",
            f"{fmt(read / headers)}×",
            "",
            "≤ 1× the headers' bytes",
            "yes" if read <= headers else "no",
        )
    )
    s.notes.append(
        f"Weights of {base.size / MiB:,.0f} MiB ({len(base.tensors)} tensors); the fine-tune "
        f"retrains {changed / MiB:.1f} MiB of consecutive tensors; "
        f"{s.facts.get('lineage_changed_tensors')} of {s.facts.get('lineage_tensors')} tensors "
        "reported changed by chunks. In-process pushes (`ingest_file`) into SQLite + filesystem, "
        "a fresh registry per run. Each header is read by two ranged reads: its length "
        "fields (16 bytes), then the rest of it."
    )


LINEAGE = Figure("lineage", "10. Lineage and diff from the chunk index", measure)
