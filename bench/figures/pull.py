"""Figure 4: pull the full carton and one blob with curl and httpx; the peer and `cat` beside it.

The peer serves the same bytes (the carton file as one blob, the member as
another); ``cat`` of the same file from the page cache is the machine's limit.
"""

from __future__ import annotations

from pathlib import Path

from bench.figures.figure import Figure
from bench.harness import MiB
from bench.harness.clients import (
    curl_download,
    httpx_download,
    peer_blob_url,
    push_peer,
    unavailable,
)
from bench.harness.data import extract_member
from bench.harness.rates import cat_seconds, warm
from bench.harness.session import Bench
from bench.harness.stats import Sample, med
from bench.report.table import Row, Section, value_row


def measure(b: Bench, s: Section) -> None:
    if b.pushed is None:
        s.na("no carton pushed in figure 1")
        return
    reg, peer = b.ensure_servers()
    c = b.pushed.carton
    blob_path = next(p for p in c.file_sha if "shard-00" in p)
    blob_sha = c.file_sha[blob_path]
    full_url = f"{reg.url}/cartons/{b.pushed.manifest}.carton?form=full"
    blob_url = f"{reg.url}/blobs/{blob_sha}"
    why_full = unavailable(b.client, "HEAD", full_url)
    why_blob = unavailable(b.client, "HEAD", blob_url)
    # the blob's bytes as a file, for the peer and the page-cache reference
    blob_file = b.work / "blob-shard-00.bin"
    blob_size = extract_member(c.path, blob_path, blob_file)
    push_peer(b.client, peer.url, blob_file, blob_sha)
    warm(c.path)
    warm(blob_file)
    _measure_one(
        b,
        s,
        f"full carton {c.size // MiB} MiB (`?form=full`)",
        "full",
        full_url,
        peer_blob_url(peer.url, b.pushed.sha256),
        c.path,
        why_full,
        target=1.0,
    )
    _measure_one(
        b,
        s,
        f"blob {blob_size // MiB} MiB (`/blobs/{{sha}}`)",
        "blob",
        blob_url,
        peer_blob_url(peer.url, blob_sha),
        blob_file,
        why_blob,
        target=1.2,
    )
    blob_file.unlink(missing_ok=True)
    s.notes.append(
        "The peer serves the same bytes: the whole carton file as one blob, and the "
        "128 MiB member as another. MiB/s from the bytes received / wall time."
    )


def _measure_one(
    b: Bench,
    s: Section,
    kind: str,
    key: str,
    reg_url: str,
    peer_url: str,
    ref_file: Path,
    why: str | None,
    target: float,
) -> None:
    """Rows for one download: registry and peer with curl and httpx, `cat` of ``ref_file``."""
    if why is not None:
        s.rows.append(Row(f"{kind}: registry", f"not available: {why}"))
    rc, rh, pc, ph, cat = Sample(), Sample(), Sample(), Sample(), Sample()
    cat_ratios = []
    for _i in range(b.scale.runs):
        if b.left() < 45:
            s.notes.append(f"{kind}: stopped early: time budget")
            break
        t_pc, n_pc = curl_download(peer_url)
        t_ph, n_ph = httpx_download(b.client, peer_url)
        t_cat = cat_seconds(ref_file)
        mib_ref = ref_file.stat().st_size / MiB
        pc.add(n_pc / MiB / t_pc)
        ph.add(n_ph / MiB / t_ph)
        cat.add(mib_ref / t_cat)
        if why is None:
            t_rc, n_rc = curl_download(reg_url)
            t_rh, n_rh = httpx_download(b.client, reg_url)
            rc.add(n_rc / MiB / t_rc, ratio=(n_rc / t_rc) / (n_pc / t_pc))
            rh.add(n_rh / MiB / t_rh, ratio=(n_rh / t_rh) / (n_ph / t_ph))
            cat_ratios.append((n_rc / MiB / t_rc) / (mib_ref / t_cat))
            b.log(
                f"pull {kind}: curl {n_rc / MiB / t_rc:.0f} MiB/s (peer {n_pc / MiB / t_pc:.0f}), "
                f"httpx {n_rh / MiB / t_rh:.0f} (peer {n_ph / MiB / t_ph:.0f}), cat {mib_ref / t_cat:.0f}"
            )
    if rc.values:
        for tool, sample in (("curl", rc), ("httpx", rh)):
            s.rows.append(
                value_row(
                    f"{kind}: registry, {tool}",
                    sample,
                    "MiB/s",
                    f"peer, {tool}",
                    f"≥ {target}×",
                    lambda r: r >= target,
                )
            )
        s.rows.append(
            value_row(
                f"{kind}: registry, curl",
                Sample(rc.values, cat_ratios),
                "MiB/s",
                "page cache (`cat`)",
            )
        )
        s.facts[f"pull_{key}_curl_ratio"] = med(rc.ratios)
        s.facts[f"pull_{key}_httpx_ratio"] = med(rh.ratios)
        s.facts[f"pull_{key}_curl"] = med(rc.values)
        s.facts[f"pull_{key}_httpx"] = med(rh.values)
        s.facts[f"pull_{key}_cat_ratio"] = med(cat_ratios)
    s.rows.append(value_row(f"{kind}: peer blob pull, curl", pc, "MiB/s"))
    s.rows.append(value_row(f"{kind}: peer blob pull, httpx", ph, "MiB/s"))
    s.rows.append(value_row(f"{kind}: `cat file > /dev/null` (warm page cache)", cat, "MiB/s"))
    s.facts[f"pull_{key}_peer_curl"] = med(pc.values)
    s.facts[f"pull_{key}_peer_httpx"] = med(ph.values)
    s.facts[f"pull_{key}_cat"] = med(cat.values)


PULL = Figure("pull", "4. Pull: full carton and one blob (curl and httpx)", measure)
