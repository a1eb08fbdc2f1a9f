"""Figure: dedup below the file, and what chunking costs a pull.

(a) A fine-tune family (tests/finetune.py: a safetensors-like weights file and six
successive checkpoints, each with its really-changed bytes declared) pushed to a
fresh registry: bytes stored per version (``stored_bytes`` deltas) against the
changed bytes, and against what file-level dedup stores (the whole file per version).

(b) ``GET /blobs/{sha}`` of the same large file from a registry that chunks it
(the default) and from one told to keep files whole
(``REGISTRY_CHUNK_MIN_FILE_BYTES`` above its size), with the peer's blob pull of
the same bytes beside them.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

from bench.figures.figure import Figure
from bench.harness import REPO, MiB
from bench.harness.clients import curl_download, peer_blob_url, push_peer, push_registry
from bench.harness.session import Bench
from bench.harness.stats import Sample
from bench.report.table import Row, Section, fmt, value_row


def _finetune():  # type: ignore[no-untyped-def]
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tests import finetune

    return finetune


def _carton(b: Bench, name: str, weights) -> tuple:  # type: ignore[no-untyped-def]
    """A carton file holding one weights file (Stored), and the weights file's sha256."""
    import hashlib
    import io

    from registry.carton.manifest import build_manifest
    from registry.carton.zipwrite import STORED, write_zip

    path = b.work / f"{name}.carton"
    toml = (
        f"spec_version = 1\nmodel_name = 'finetune-{b.tag}'\n\n[runner]\n"
        "runner_name = 'noop'\nrequired_framework_version = '=1.0.0'\nrunner_compat_version = 1\n"
    ).encode()
    h = hashlib.sha256()
    for block in weights.iter_bytes():
        h.update(block)
    manifest = build_manifest(
        [("carton.toml", hashlib.sha256(toml).hexdigest()), ("model/w.safetensors", h.hexdigest())]
    )

    class _Stream(io.RawIOBase):
        def __init__(self) -> None:
            self._it = weights.iter_bytes()
            self._buf = b""

        def readable(self) -> bool:
            return True

        def read(self, n: int = -1) -> bytes:
            while len(self._buf) < max(n, 1):
                block = next(self._it, b"")
                if not block:
                    break
                self._buf += block
            out, self._buf = (self._buf, b"") if n < 0 else (self._buf[:n], self._buf[n:])
            return out

    with path.open("wb") as out:
        write_zip(
            out,
            [
                ("carton.toml", lambda: io.BytesIO(toml), STORED),
                ("MANIFEST", lambda: io.BytesIO(manifest.raw), STORED),
                ("model/w.safetensors", _Stream, STORED),
            ],
        )
    return path, h.hexdigest()


def _sqlite(b: Bench, name: str) -> str:
    """A registry of its own (fresh stats), on SQLite whatever the run's backend."""
    return f"sqlite:///{b.work / f'chunks-{name}.db'}"


def _stored_bytes(b: Bench, url: str) -> int:
    return int(b.client.get(f"{url}/api/v1/stats").json()["stored_bytes"])


def _family(b: Bench, s: Section) -> None:
    finetune = _finetune()
    size = b.scale.stored_size // 4
    reg = b.start_registry(
        label="chunks-family", data_dir=b.work / "chunks-family", database_url=_sqlite(b, "family")
    )
    try:
        versions = finetune.family(size, seed=hash(b.tag) % 1000)
        stored_total = changed_total = file_level = 0
        rows = []
        for i, change in enumerate(versions, start=1):
            path, _sha = _carton(b, f"finetune-v{i}", change.file)
            before = _stored_bytes(b, reg.url)
            push_registry(b.client, reg.url, path)
            added = _stored_bytes(b, reg.url) - before
            path.unlink(missing_ok=True)
            changed = change.changed_bytes
            stored_total += added
            changed_total += changed
            file_level += change.file.size
            step = "base" if i == 1 else finetune.FAMILY_STEPS[i - 2]
            rows.append((f"v{i} ({step})", added, changed))
            b.log(
                f"finetune v{i} {step}: stored {added / MiB:.2f} MiB, changed {changed / MiB:.2f}"
            )
        for label, added, changed in rows:
            s.rows.append(
                Row(
                    f"fine-tune {label}: stored / really changed",
                    f"{added / MiB:.2f} / {changed / MiB:.2f} MiB",
                    ratio=f"{added / changed:.2f}×" if changed else "",
                )
            )
        ratio = stored_total / changed_total
        saving = 1 - stored_total / file_level
        s.rows.append(
            Row(
                f"family of {len(versions)} ({size // MiB} MiB base): stored / changed",
                f"{fmt(ratio)}×",
                target="≤ 1.5×",
                met="yes" if ratio <= 1.5 else "**no**",
            )
        )
        s.rows.append(
            Row(
                "family: saved against file-level dedup",
                f"{saving:.0%} (stored {stored_total / MiB:.0f} of {file_level / MiB:.0f} MiB)",
                target="≥ 50%",
                met="yes" if saving >= 0.5 else "**no**",
            )
        )
        s.facts["finetune_ratio"] = ratio
        s.facts["finetune_saving"] = saving
        _layout_cost(b, s, reg, stored_total)
    finally:
        reg.stop()


def _layout_cost(b: Bench, s: Section, reg, stored: int) -> None:  # type: ignore[no-untyped-def]
    """Store objects per GiB stored, and the index's size against the bytes stored."""
    root = b.work / "chunks-family" / "blobs"
    objects = [p for d in ("packs", "sha256") for p in (root / d).rglob("*") if p.is_file()]
    per_gib = len(objects) / (stored / (1024 * MiB))
    s.rows.append(
        Row(
            "family: store objects per GiB stored",
            f"{per_gib:.0f} ({len(objects)} objects)",
            target="≤ ~100",
            met="yes" if per_gib <= 100 else "**no**",
        )
    )
    db = b.work / "chunks-family.db"
    metadata = _chunk_metadata_bytes(db)
    share = metadata / stored
    s.rows.append(
        Row(
            "family: chunk index and pack metadata (the packs, chunks and blob_segments "
            "tables with their indexes, SQLite pages) / bytes stored",
            f"{share:.2%} ({metadata / MiB:.2f} MiB)",
            target="≤ 1%",
            met="yes" if share <= 0.01 else "**no**",
        )
    )
    whole = sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if p.is_file())
    s.rows.append(
        Row(
            "family: the whole SQLite database (every table, WAL and free pages included) "
            "/ bytes stored",
            f"{whole / stored:.2%} ({whole / MiB:.1f} MiB)",
        )
    )


CHUNK_TABLES = ("packs", "chunks", "blob_segments")


def _chunk_metadata_bytes(db: Path) -> int:
    """Bytes of the pages that hold the chunk store's tables and their indexes (SQLite's
    dbstat), as committed, WAL included: what the chunk index costs, without the
    model catalog, the schema of an empty database or pages SQLite keeps free."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        marks = ",".join("?" * len(CHUNK_TABLES))
        (total,) = conn.execute(
            "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name IN "
            f"(SELECT name FROM sqlite_master WHERE tbl_name IN ({marks}))",
            CHUNK_TABLES,
        ).fetchone()
    return int(total)


def _pull(b: Bench, s: Section) -> None:
    """The same file from a chunking and a whole-file registry, and from the peer."""
    if b.pushed is None:
        s.na("no carton pushed in figure 1")
        return
    _, peer = b.ensure_servers()
    c = b.pushed.carton
    whole = b.start_registry(
        label="chunks-whole",
        data_dir=b.work / "chunks-whole",
        database_url=_sqlite(b, "whole"),
        settings={"REGISTRY_CHUNK_MIN_FILE_BYTES": str(1 << 50)},
    )
    try:
        push_registry(b.client, whole.url, c.path)
        blob_path = next(p for p in c.file_sha if "shard-00" in p)
        sha = c.file_sha[blob_path]
        assert b.reg is not None
        chunked_url, whole_url = f"{b.reg.url}/blobs/{sha}", f"{whole.url}/blobs/{sha}"
        from bench.harness.data import extract_member

        blob_file = b.work / "chunks-blob.bin"
        extract_member(c.path, blob_path, blob_file)
        push_peer(b.client, peer.url, blob_file, sha)
        blob_file.unlink(missing_ok=True)
        chunked, whole_s, theirs = Sample(), Sample(), Sample()
        for _ in range(b.scale.runs):
            if b.left() < 60:
                s.notes.append("pull: stopped early: time budget")
                break
            t_w, n_w = curl_download(whole_url)
            t_p, n_p = curl_download(peer_blob_url(peer.url, sha))
            t_c, n_c = curl_download(chunked_url)
            chunked.add(n_c / MiB / t_c, ratio=(n_c / t_c) / (n_w / t_w))
            whole_s.add(n_w / MiB / t_w, ratio=(n_w / t_w) / (n_p / t_p))
            theirs.add(n_p / MiB / t_p)
            time.sleep(0.2)
        if chunked.values:
            s.rows.append(
                value_row(
                    "blob GET of a chunked file (every chunk's BLAKE3 checked), curl",
                    chunked,
                    "MiB/s",
                    "same file stored whole",
                    "≥ 0.9×",
                    lambda r: r >= 0.9,
                )
            )
            peer_ratio = Sample(
                chunked.values, [c / p for c, p in zip(chunked.values, theirs.values, strict=True)]
            )
            s.rows.append(
                value_row(
                    "blob GET of a chunked file (every chunk's BLAKE3 checked), curl",
                    peer_ratio,
                    "MiB/s",
                    "peer blob pull",
                    "≥ 1.0×",
                    lambda r: r >= 1.0,
                )
            )
            s.rows.append(value_row("blob GET, file stored whole, curl", whole_s, "MiB/s", "peer"))
            s.rows.append(value_row("peer blob pull, curl", theirs, "MiB/s"))
    finally:
        whole.stop()


def measure(b: Bench, s: Section) -> None:
    _family(b, s)
    _pull(b, s)
    s.notes.append(
        "Changed bytes are declared by the generator (tests/finetune.py) and checked against "
        "the real bytes by its unit tests. Stored bytes are `stored_bytes` deltas of "
        "GET /api/v1/stats: packs and whole blobs, what the store holds."
    )
    s.notes.append(
        "Reads are verified: every chunk of a chunked file is hashed (BLAKE3) against its "
        "name before its bytes are sent (registry/services/chunkstore/verified.py), and a "
        "file stored whole, read whole, against its sha256; the peer checks nothing on reads."
    )
    s.notes.append(
        "Chunk size: FastCDC 2020, average 64 KiB, min 32 KiB, max 256 KiB (real mean "
        "85-87 KiB), NC 1, BLAKE3 names, chosen by bench/chunk_study.py (bench/CHUNK_STUDY.md): "
        "on the 64/256 MiB families it stores 1.13×/1.09× the changed bytes and saves "
        "83%/85% against file-level dedup, with an index estimated at 0.2-0.5% of the bytes "
        "stored; a 16 KiB average stores closer to the changed bytes (a 256 KiB insert costs "
        "1.2× instead of 2×) but its index reaches 0.9-1.1%, and cutting plus naming costs "
        "more per byte. FastCDC + BLAKE3 per chunk: 1,840 MiB per CPU-second; with sha256 "
        "names 1,046."
    )


CHUNKS = Figure("chunks", "Chunk store: dedup below the file, and chunked pulls", measure)
