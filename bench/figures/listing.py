"""Figure 7: model listing latency on Postgres with many models, and where the time goes.

A fresh database is filled with generated rows (INSERT … SELECT generate_series);
the HTTP latency is then split into ``listing.list_models()`` in-process and the
database's own execution time (EXPLAIN ANALYZE).
"""

from __future__ import annotations

import json
import math
import time
import traceback
from typing import Any

from bench.figures.figure import Figure
from bench.harness.session import Bench, Scale
from bench.harness.stats import med
from bench.report.table import Row, Section, fmt, verdict


def _probes(mid: int) -> list[tuple[str, str]]:
    """(label, path) of each route timed."""
    return [
        ("`GET /api/v1/models` (first page)", "/api/v1/models"),
        ("`GET /api/v1/models?q=` (empty query)", "/api/v1/models?q="),
        (
            f"`GET /api/v1/models?q=model-{mid:06d}` (one match)",
            f"/api/v1/models?q=model-{mid:06d}",
        ),
        ("`GET /api/v1/models?q=zebra` (no match)", "/api/v1/models?q=zebra"),
        (
            "`GET /api/v1/models?q=runner:torchscript` (a field term, every model)",
            "/api/v1/models?q=runner:torchscript",
        ),
        (
            "`GET /api/v1/models?q=input:int64 dtype:float32` (two terms, no match)",
            "/api/v1/models?q=input:int64%20dtype:float32",
        ),
        ("`GET /` (web index)", "/"),
        (f"`GET /?q=model-{mid:06d}`", f"/?q=model-{mid:06d}"),
    ]


def measure(b: Bench, s: Section) -> None:
    if b.left() < 90:
        s.na("time budget")
        return
    try:
        import psycopg

        name = b.create_pg_db("bench_list")
    except Exception as exc:
        s.na(f"Postgres not reachable at {b.args.pg_url}: {exc}")
        return
    url = b.pg_url(name)
    reg = None
    try:
        from registry.db.engine import make_engine
        from registry.db.migrate import upgrade

        eng = make_engine(url)
        upgrade(eng)
        eng.dispose()
        t = time.perf_counter()
        _fill(psycopg, url, b.scale)
        b.log(f"listing data inserted in {time.perf_counter() - t:.1f}s")
        s.notes.append(
            f"Rows inserted with INSERT … SELECT generate_series in {time.perf_counter() - t:.0f} s, then ANALYZE."
        )
        reg = b.start_registry(
            label="registry-listing", data_dir=b.work / "listing-data", database_url=url
        )
        mid = b.scale.models // 2
        n = 20 if b.scale.quick else 50
        for label, path in _probes(mid):
            r0 = b.client.get(reg.url + path, timeout=60)
            if r0.status_code != 200:
                s.rows.append(
                    Row(label, f"not available: answered {r0.status_code} {r0.text[:100]!r}")
                )
                continue
            times: list[float] = []
            stop_at = time.monotonic() + (10 if b.scale.quick else 15)
            b.client.get(reg.url + path, timeout=60)
            for _ in range(n):
                if time.monotonic() > stop_at:
                    break
                t0 = time.perf_counter()
                r = b.client.get(reg.url + path, timeout=60)
                times.append((time.perf_counter() - t0) * 1000)
                r.raise_for_status()
            times.sort()
            p50 = med(times)
            p99 = times[min(len(times) - 1, math.ceil(0.99 * len(times)) - 1)]
            s.rows.append(
                Row(
                    label,
                    f"p50 {fmt(p50)} ms, p99 {fmt(p99)} ms",
                    f"{fmt(times[0])} – {fmt(times[-1])} ms ({len(times)} requests)",
                    "",
                    "",
                    "",
                    "p50 < 30 ms",
                    verdict(p50 < 30),
                )
            )
            s.facts[f"listing {path}"] = p50
            b.log(f"listing {path}: p50 {p50:.1f} ms p99 {p99:.1f} ms")
        _explain(s, url, mid)
        s.notes.append(
            "Sequential requests from one httpx client over loopback (latency = server time + loopback), after one warm-up request; at most 50 requests or 15 s per route; with few requests the p99 is their maximum."
        )
    except Exception as exc:
        s.na(f"{type(exc).__name__}: {exc}")
        traceback.print_exc()
    finally:
        if reg is not None:
            reg.stop()
        b.drop_pg_db(name)


def _explain(s: Section, url: str, mid: int) -> None:
    """Split listing time: in-process `listing.list_models()` vs the DB's own execution time."""
    try:
        from sqlalchemy import event
        from sqlalchemy.orm import Session

        from registry.db.engine import make_engine
        from registry.services import listing
    except Exception as exc:  # the catalog may change shape
        s.notes.append(f"EXPLAIN not available: {exc}")
        return
    eng = make_engine(url)
    md = [
        "",
        "| `listing.list_models()` in-process | Python + DB, median of 3 | DB execution of its SELECTs (EXPLAIN ANALYZE, TIMING OFF) | plan's top node |",
        "| --- | --- | --- | --- |",
    ]
    try:
        for label, q in (
            ("first page", None),
            (f"q=model-{mid:06d}", f"model-{mid:06d}"),
            ("q=zebra", "zebra"),
        ):
            captured: list[tuple[str, Any]] = []

            def cap(
                conn: Any,
                cursor: Any,
                statement: str,
                parameters: Any,
                context: Any,
                many: bool,
                captured: list = captured,
            ) -> None:
                captured.append((statement, parameters))

            event.listen(eng, "before_cursor_execute", cap)
            times = []
            for _ in range(3):
                captured.clear()
                t = time.perf_counter()
                with Session(eng) as session:
                    listing.list_models(session, q=q)
                times.append((time.perf_counter() - t) * 1000)
            event.remove(eng, "before_cursor_execute", cap)
            db_ms, node = 0.0, ""
            with eng.connect() as conn:
                for st, params in captured:
                    if not st.lstrip().upper().startswith("SELECT"):
                        continue
                    plan = conn.exec_driver_sql(
                        "EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) " + st, params
                    ).scalar()
                    plan = plan[0] if isinstance(plan, list) else json.loads(plan)[0]
                    db_ms += plan["Execution Time"]
                    node = (
                        node
                        or f"{plan['Plan']['Node Type']} (rows {plan['Plan'].get('Actual Rows')})"
                    )
            md.append(f"| {label} | {fmt(med(times))} ms | {fmt(db_ms)} ms | {node} |")
            s.facts[f"listing_inproc {label}"] = med(times)
            s.facts[f"listing_db {label}"] = db_ms
        s.extra_md = "\n".join(md)
    except Exception as exc:
        s.notes.append(f"EXPLAIN failed: {type(exc).__name__}: {str(exc)[:200]}")
    finally:
        eng.dispose()


def _fill(psycopg: Any, url: str, scale: Scale) -> None:
    """``scale.models`` models with one version each and ``scale.file_rows`` file rows."""
    m, f = scale.models, scale.file_rows
    per = max(1, f // m)
    words = "ARRAY['resnet','bert','whisper','llama','vit','yolo','t5','clip','gpt','unet']"
    sql = [
        f"""INSERT INTO blobs (sha256, size, crc32, created_at)
            SELECT encode(sha256(('blob' || i)::bytea), 'hex'), 1000 + i, i % 4294967295, now()
            FROM generate_series(1, {f}) i""",
        f"""INSERT INTO cartons (manifest_sha256, manifest, carton_toml, spec_version, model_name,
                short_description, description, runner_name, framework_version,
                runner_compat_version, required_platforms, file_count, total_bytes, created_at)
            SELECT encode(sha256(('carton' || i)::bytea), 'hex'), convert_to('MANIFEST ' || i, 'UTF8'),
                'spec_version = 1' || chr(10) || 'model_name = "model-' || lpad(i::text, 6, '0') || '"',
                1, 'model-' || lpad(i::text, 6, '0'),
                'A ' || ({words})[1 + i % 10] || ' model, number ' || i,
                'Long description of model ' || i || ' with some words about ' || ({words})[1 + (i * 7) % 10],
                'torchscript', '=2.0.0', 1, '[]'::json, {per}, {per} * 1000 + i, now()
            FROM generate_series(1, {m}) i""",
        f"""INSERT INTO carton_files (manifest_sha256, path, blob_sha256, size)
            SELECT encode(sha256(('carton' || (1 + (j - 1) / {per}))::bytea), 'hex'),
                   'model/file-' || ((j - 1) % {per}) || '.bin',
                   encode(sha256(('blob' || j)::bytea), 'hex'), 1000 + j
            FROM generate_series(1, {m * per}) j""",
        f"""INSERT INTO models (name, last_version, created_at, updated_at)
            SELECT 'model-' || lpad(i::text, 6, '0'), 1, now() - (i || ' seconds')::interval, now() - (i || ' seconds')::interval
            FROM generate_series(1, {m}) i""",
        """INSERT INTO versions (model_id, version, manifest_sha256, state, state_reason, created_at)
            SELECT mo.id, 1, encode(sha256(('carton' || substr(mo.name, 7)::int)::bytea), 'hex'), 'READY', '', now()
            FROM models mo""",
        # the listing columns the services keep (services/listing.py), with the search
        # tokens of a typical vision model's inputs and outputs (services/search.py)
        """UPDATE models mo SET latest_version = 1, latest_bytes = c.total_bytes,
            search_text = lower(mo.name || ' ' || c.short_description || ' ' || c.description
                || ' ' || c.runner_name)
            FROM versions v JOIN cartons c ON c.manifest_sha256 = v.manifest_sha256
            WHERE v.model_id = mo.id""",
        """INSERT INTO model_search_tokens (model_id, tokens)
            SELECT id, ' runner:torchscript framework:=2.0.0 framework:2.0.0 input:image'
                || ' input:float32 input:[1,3,224,224] tensor:image dtype:float32'
                || ' shape:[1,3,224,224] output:embedding output:float32 output:[1,512]'
                || ' tensor:embedding shape:[1,512] '
            FROM models""",
        "ANALYZE",
    ]
    with psycopg.connect(url, autocommit=True) as conn:
        # consistent by construction: skip the per-row foreign-key triggers while loading
        conn.execute("SET session_replication_role = replica")
        for q in sql:
            conn.execute(q)


def _title(scale: Scale) -> str:
    return f"7. Listing with {scale.models:,} models and {scale.file_rows:,} file rows (Postgres)"


LISTING = Figure("listing", _title, measure)
