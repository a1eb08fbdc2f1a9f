"""Figure: what dedup without a side channel costs a second namespace.

Team A (namespace ``acme``) pushes a carton of ``size`` random bytes with
``carton-registry push``'s client code (``registry.client.push_carton``) to a fresh
SQLite + filesystem registry served by uvicorn on 127.0.0.1; then team B
(namespace ``open``) pushes a carton holding the same weights file, and pushes it
again. When ``acme`` is private, B cannot be told the file is stored: its client
uploads it (once), the registry verifies it and keeps its one copy. When ``acme``
is public, B's negotiation hears "present" and sends nothing: the control.
Reported: B's bytes sent, against the weights' size, and the growth of the store
(``stored_bytes``, an admin's view) during B's push.
"""

from __future__ import annotations

import os
import sys
import time

from bench.figures.figure import Figure
from bench.harness import REPO, MiB
from bench.harness.session import Bench
from bench.harness.stats import Sample
from bench.report.table import Section, value_row

MAX_SIZE = 256 * MiB


def _run(b: Bench, size: int, visibility: str, run: int) -> dict[str, float]:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from registry.client import RegistryClient, push_carton
    from registry.services.auth import create_token
    from registry.services.context import RegistryContext
    from registry.settings import Settings
    from tests.conftest import start_live_server
    from tests.helpers import make_carton

    work = b.work / f"namespaces-{visibility}-{run}"
    ctx = RegistryContext.open(Settings(data_dir=work / "data", auth="write"), migrate=True)
    server = start_live_server(ctx)
    try:
        url = server.url
        admin = create_token(ctx, None, "admin")[0]
        with RegistryClient(url, admin) as c:
            for ns, vis in (("acme", visibility), ("open", "public")):
                c.request("PUT", f"/api/v1/namespaces/{ns}", json={"visibility": vis})
        a = create_token(ctx, None, "push", ["acme"])[0]
        bt = create_token(ctx, None, "push", ["open"])[0]
        weights = os.urandom(size)
        first, second = work / "a.carton", work / "b.carton"
        first.write_bytes(make_carton({"w.bin": weights}, model_name="bert"))
        second.write_bytes(make_carton({"w.bin": weights, "b.txt": b"b"}, model_name="gpt"))
        del weights

        def stored() -> int:
            with RegistryClient(url, admin) as c:
                return int(c.request("GET", "/api/v1/stats").json()["stored_bytes"])

        with RegistryClient(url, a) as c:
            t = time.perf_counter()
            push_carton(c, first, namespace="acme")
            a_seconds = time.perf_counter() - t
        before = stored()
        with RegistryClient(url, bt) as c:
            t = time.perf_counter()
            push_carton(c, second, namespace="open")
            b_seconds = time.perf_counter() - t
            b_sent = c.bytes_sent
        grown = stored() - before
        with RegistryClient(url, bt) as c:
            push_carton(c, second, namespace="open")
            again = c.bytes_sent
        return {
            "a_seconds": a_seconds,
            "b_seconds": b_seconds,
            "b_sent": b_sent,
            "grown": grown,
            "again": again,
        }
    finally:
        server.close()
        ctx.close()


def measure(b: Bench, s: Section) -> None:
    if b.left() < 60:
        s.na("time budget")
        return
    size = min(b.scale.stored_size, MAX_SIZE)
    sent, grown, again, cost = Sample(), Sample(), Sample(), Sample()
    public_sent = Sample()
    for run in range(b.scale.runs):
        r = _run(b, size, "private", run)
        sent.add(r["b_sent"] / MiB, ratio=r["b_sent"] / size)
        grown.add(r["grown"] / MiB)
        again.add(r["again"] / MiB)
        cost.add(r["b_seconds"], ratio=r["b_seconds"] / r["a_seconds"])
        p = _run(b, size, "public", run)
        public_sent.add(p["b_sent"] / MiB, ratio=p["b_sent"] / size)
        b.log(
            f"namespaces run {run}: B sent {r['b_sent'] / MiB:.1f} MiB (private A), "
            f"{p['b_sent'] / MiB:.2f} MiB (public A); store grew {r['grown']} B"
        )
    s.rows.append(
        value_row(
            "B's first push of A's weights, A private: bytes sent",
            sent,
            "MiB",
            ratio_to="the weights",
            target="≈ 1× (sent once)",
            check=lambda v: 0.95 <= v <= 1.1,
        )
    )
    s.rows.append(
        value_row(
            "... the store's growth during it",
            grown,
            "MiB",
            target="< 1% of the weights",
            check=lambda v: v < size / MiB / 100,
            check_on="value",
        )
    )
    s.rows.append(value_row("... its time, against A's first push", cost, "s", "A's push"))
    s.rows.append(value_row("B's push again (unchanged): bytes sent", again, "MiB"))
    s.rows.append(
        value_row(
            "control, A public: B's first push, bytes sent",
            public_sent,
            "MiB",
            ratio_to="the weights",
        )
    )
    s.notes.append(
        f"Weights of {size / MiB:,.0f} MiB of random bytes (stored as chunks); cartons pushed "
        "with the CLI's client code (`push_carton`) to uvicorn on 127.0.0.1, SQLite + "
        "filesystem, `REGISTRY_AUTH=write`, namespaced push tokens, a fresh registry per "
        "run. The price of privacy is B uploading bytes the registry already holds, once; "
        "the store keeps one copy."
    )


NAMESPACES = Figure("namespaces", "11. Private namespaces: dedup without a side channel", measure)
