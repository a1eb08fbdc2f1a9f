"""Push through POST /api/v1/cartons on every backend pair."""

from __future__ import annotations

import hashlib
import io
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from backports.zstd import zipfile
from sqlalchemy import func, select

from registry.carton.limits import ArchiveLimits
from registry.db.tables import Blob, Carton, CartonFile, Model, Version
from tests.conftest import FIXTURE_CARTONS, REFERENCE, fixture_carton
from tests.helpers import row_counts


def manifest_sha256(path: Path) -> str:
    with zipfile.ZipFile(path) as z:
        name = "MANIFEST" if "MANIFEST" in z.namelist() else "/MANIFEST"
        return hashlib.sha256(z.read(name)).hexdigest()


def counts(ctx) -> dict[str, int]:
    return row_counts(ctx, Blob, Carton, CartonFile, Model, Version)


def stored_blobs(ctx) -> set[str]:
    return {b.sha256 for b in ctx.blobs.iter_blobs()}


def push(client, path_or_bytes, **params):
    data = path_or_bytes.read_bytes() if isinstance(path_or_bytes, Path) else path_or_bytes
    return client.post("/api/v1/cartons", content=data, params=params)


def rebuild(src: Path, *, replace: dict[str, bytes] | None = None, drop=(), extra=None) -> bytes:
    """A copy of a fixture carton with members replaced, dropped or added (MANIFEST untouched)."""
    out = io.BytesIO()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            if info.filename in drop:
                continue
            data = (replace or {}).get(info.filename, zin.read(info.filename))
            zout.writestr(info.filename, data, compress_type=zipfile.ZIP_DEFLATED)
        for name, data in (extra or {}).items():
            zout.writestr(name, data)
    return out.getvalue()


@pytest.mark.parametrize(
    "carton", [p for p in FIXTURE_CARTONS if "05_links" not in p.name], ids=lambda p: p.name
)
def test_every_fixture_pushes_and_repush_is_idempotent(client, registry_ctx, carton):
    response = push(client, carton)
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["manifest_sha256"] == manifest_sha256(carton)
    assert body["files"] > 0
    assert body["bytes_deduplicated"] == body["bytes_total"] - body["bytes_new"]
    if body["model_name"] is None:
        assert body["version"] is None
    else:
        assert isinstance(body["version"], int) and body["version"] >= 1
    before = counts(registry_ctx)
    again = push(client, carton)
    assert again.status_code == 200
    assert again.json() == {
        **body,
        "bytes_new": 0,
        "bytes_deduplicated": body["bytes_total"],
        "bytes_stored": 0,
    }
    assert counts(registry_ctx) == before
    meta = client.get(f"/api/v1/cartons/{body['manifest_sha256']}").json()
    assert len(meta["files"]) == body["files"]


def test_carton_metadata_by_prefix_or_digest_reference(client):
    sha = push(client, fixture_carton("02")).json()["manifest_sha256"]
    for ref in (sha[:8], f"sha256:{sha}", f"sha256:{sha[:16]}"):
        response = client.get(f"/api/v1/cartons/{ref}")
        assert response.status_code == 200, (ref, response.text)
        assert response.json()["manifest_sha256"] == sha
    other = "f" if sha[0] != "f" else "e"
    for ref, status in ((sha[:7], 400), (other * 8, 404), ("ABCDEF01", 400)):
        response = client.get(f"/api/v1/cartons/{ref}")
        assert response.status_code == status, ref
        assert response.json()["error"]


def test_identical_files_in_one_carton_stored_once(client, registry_ctx):
    body = push(client, fixture_carton("02")).json()
    with registry_ctx.sessions() as s:
        distinct = s.scalar(select(func.count(func.distinct(CartonFile.blob_sha256))))
    assert distinct < body["files"]
    assert len(stored_blobs(registry_ctx)) == distinct
    assert body["bytes_new"] < body["bytes_total"]


def test_shared_bytes_stored_once_across_cartons(client, registry_ctx):
    a = push(client, fixture_carton("03")).json()
    # A second carton: same files, one extra file, so a different manifest.
    src = fixture_carton("03")
    with zipfile.ZipFile(src) as z:
        manifest = z.read("MANIFEST")
    extra = b"a new file\n"
    line = f"model/zzz_extra.txt={hashlib.sha256(extra).hexdigest()}\n".encode()
    lines = sorted([*manifest.splitlines(keepends=True), line])
    data = rebuild(src, replace={"MANIFEST": b"".join(lines)}, extra={"model/zzz_extra.txt": extra})
    b = push(client, data).json()
    assert b["manifest_sha256"] != a["manifest_sha256"]
    assert b["bytes_new"] == len(extra)
    assert b["version"] == a["version"] + 1
    stats = client.get("/api/v1/stats").json()
    assert stats["cartons"] == 2 and stats["models"] == 1
    assert stats["logical_bytes"] == a["bytes_total"] + b["bytes_total"]
    assert stats["stored_bytes"] == a["bytes_new"] + len(extra)
    assert stats["dedup_ratio"] == pytest.approx(stats["logical_bytes"] / stats["stored_bytes"])


class _BlobServer:
    """Serves links-blobs/ on 127.0.0.1 (05's LINKS say port 8765; we rewrite to ours)."""

    def __init__(self, corrupt: bool = False) -> None:
        blobs = REFERENCE / "links-blobs"
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                name = self.path.rsplit("/", 1)[-1]
                path = blobs / name
                if not path.is_file():
                    self.send_response(404)
                    self.end_headers()
                    return
                data = path.read_bytes()
                if outer.corrupt:
                    data = data + b"tampered"
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.corrupt = corrupt
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def links_carton(port: int) -> bytes:
    src = fixture_carton("05")
    with zipfile.ZipFile(src) as z:
        links = z.read("/LINKS").replace(b"127.0.0.1:8765", f"127.0.0.1:{port}".encode())
    return rebuild(src, replace={"/LINKS": links})


@pytest.fixture
def blob_server():
    server = _BlobServer()
    yield server
    server.close()


@pytest.mark.settings(link_fetch_allow=("127.0.0.1",))
def test_links_resolved_from_allow_listed_host(client, registry_ctx, blob_server):
    response = push(client, links_carton(blob_server.port))
    assert response.status_code == 201, response.text
    assert response.json()["manifest_sha256"] == manifest_sha256(fixture_carton("03"))
    for blob in (REFERENCE / "links-blobs").iterdir():
        assert registry_ctx.blobs.exists(blob.name)


def _assert_unchanged(registry_ctx, before_counts, before_blobs):
    assert counts(registry_ctx) == before_counts
    assert stored_blobs(registry_ctx) <= before_blobs | stored_blobs(registry_ctx)
    with registry_ctx.sessions() as s:
        assert s.scalar(select(func.count()).select_from(Carton)) == before_counts["cartons"]


def test_links_host_not_allowed(client, registry_ctx, blob_server):
    before = counts(registry_ctx)
    response = push(client, links_carton(blob_server.port))
    assert response.status_code == 422
    assert "REGISTRY_LINK_FETCH_ALLOW" in response.json()["error"]
    assert "model/vocab.txt" in response.json()["error"] or "misc/" in response.json()["error"]
    assert counts(registry_ctx) == before


@pytest.mark.settings(link_fetch_allow=("127.0.0.1",))
def test_links_url_serving_wrong_bytes(client, registry_ctx):
    server = _BlobServer(corrupt=True)
    try:
        before = counts(registry_ctx)
        response = push(client, links_carton(server.port))
    finally:
        server.close()
    assert response.status_code == 422
    assert "does not hash" in response.json()["error"]
    assert counts(registry_ctx) == before
    for blob in (REFERENCE / "links-blobs").iterdir():
        assert not registry_ctx.blobs.exists(blob.name)


def test_missing_member_without_links(client, registry_ctx):
    data = rebuild(fixture_carton("03"), drop={"model/vocab.txt"})
    before = counts(registry_ctx)
    response = push(client, data)
    assert response.status_code == 400
    assert "model/vocab.txt" in response.json()["error"]
    assert counts(registry_ctx) == before


def test_tampered_member_rejected(client, registry_ctx):
    data = rebuild(fixture_carton("03"), replace={"model/vocab.txt": b"tampered vocabulary\n"})
    before = counts(registry_ctx)
    response = push(client, data)
    assert response.status_code == 400
    assert "model/vocab.txt" in response.json()["error"]
    assert counts(registry_ctx) == before
    assert hashlib.sha256(b"tampered vocabulary\n").hexdigest() not in stored_blobs(registry_ctx)


def test_not_a_zip(client, registry_ctx):
    before = counts(registry_ctx)
    response = push(client, b"this is not a zip file at all")
    assert response.status_code == 400
    assert "zip" in response.json()["error"]
    assert counts(registry_ctx) == before
    assert stored_blobs(registry_ctx) == set()


def test_truncated_upload(client, registry_ctx):
    data = fixture_carton("02").read_bytes()
    before = counts(registry_ctx)
    response = push(client, data[: len(data) // 2])
    assert response.status_code == 400
    assert counts(registry_ctx) == before
    assert stored_blobs(registry_ctx) == set()


@pytest.mark.settings(max_upload_bytes=1000)
def test_oversize_upload(client, registry_ctx):
    response = push(client, fixture_carton("02"))
    assert response.status_code == 413
    assert "REGISTRY_MAX_UPLOAD_BYTES" in response.json()["error"]
    assert counts(registry_ctx)["cartons"] == 0
    assert stored_blobs(registry_ctx) == set()


def _with_carton_toml(src: Path, toml: bytes) -> bytes:
    with zipfile.ZipFile(src) as z:
        manifest = z.read("MANIFEST").decode()
    lines = [
        f"carton.toml={hashlib.sha256(toml).hexdigest()}"
        if line.startswith("carton.toml=")
        else line
        for line in manifest.splitlines()
    ]
    return rebuild(
        src, replace={"carton.toml": toml, "MANIFEST": ("\n".join(lines) + "\n").encode()}
    )


def test_invalid_carton_toml(client, registry_ctx):
    data = _with_carton_toml(fixture_carton("01"), b"spec_version = 1\n[runner\n")
    response = push(client, data)
    assert response.status_code == 400
    assert "carton.toml" in response.json()["error"] or "toml" in response.json()["error"].lower()
    assert counts(registry_ctx)["cartons"] == 0
    assert stored_blobs(registry_ctx) == set()


def test_spec_version_2_rejected(client, registry_ctx):
    with zipfile.ZipFile(fixture_carton("01")) as z:
        toml = z.read("carton.toml").replace(b"spec_version = 1", b"spec_version = 2")
    assert b"spec_version = 2" in toml
    response = push(client, _with_carton_toml(fixture_carton("01"), toml))
    assert response.status_code == 400
    assert "spec_version" in response.json()["error"]
    assert counts(registry_ctx)["cartons"] == 0
    assert stored_blobs(registry_ctx) == set()


def test_unnamed_carton_and_model_param(client, registry_ctx):
    with zipfile.ZipFile(fixture_carton("01")) as z:
        toml = z.read("carton.toml")
    unnamed = b"\n".join(line for line in toml.split(b"\n") if not line.startswith(b"model_name"))
    data = _with_carton_toml(fixture_carton("01"), unnamed)
    body = push(client, data).json()
    assert body["model_name"] is None and body["version"] is None
    named = push(client, data, model="given-name")
    assert named.status_code == 201
    assert named.json()["model_name"] == "given-name" and named.json()["version"] == 1
    # Known by that name now: its metadata and an unnamed re-push say so.
    meta = client.get(f"/api/v1/cartons/{body['manifest_sha256']}").json()
    assert meta["model_name"] == "given-name"
    again = push(client, data)
    assert again.status_code == 200
    assert again.json()["model_name"] == "given-name" and again.json()["version"] == 1
    # A tag needs a name.
    other = _with_carton_toml(fixture_carton("01"), unnamed + b"\n# another carton\n")
    tagged = push(client, other, tag="prod")
    assert tagged.status_code == 400
    assert "tag needs a model name" in tagged.json()["error"]


def test_concurrent_pushes_share_blobs(client, registry_ctx):
    import concurrent.futures

    src = fixture_carton("03")
    with zipfile.ZipFile(src) as z:
        manifest = z.read("MANIFEST")
    variants = []
    for i in range(4):
        extra = f"variant {i}\n".encode()
        line = f"model/zz_{i}.txt={hashlib.sha256(extra).hexdigest()}\n".encode()
        lines = sorted([*manifest.splitlines(keepends=True), line])
        variants.append(
            rebuild(src, replace={"MANIFEST": b"".join(lines)}, extra={f"model/zz_{i}.txt": extra})
        )
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda d: push(client, d), variants))
    assert all(r.status_code == 201 for r in results), [r.text for r in results]
    assert sorted(r.json()["version"] for r in results) == [1, 2, 3, 4]
    with registry_ctx.sessions() as s:
        referenced = set(s.scalars(select(CartonFile.blob_sha256)))
    assert stored_blobs(registry_ctx) == referenced


def test_push_without_known_files_reads_nothing_back(client, registry_ctx, monkeypatch):
    """Files absent from the zip whose blobs are indexed come from the rows, not the store."""
    full = push(client, fixture_carton("03")).json()
    opened: list[str] = []
    real_open = registry_ctx.blobs.open

    def counting_open(sha256, *args, **kwargs):
        opened.append(sha256)
        return real_open(sha256, *args, **kwargs)

    monkeypatch.setattr(registry_ctx.blobs, "open", counting_open)
    slim = rebuild(fixture_carton("03"), drop={"model/vocab.txt", "misc/diagram.png"})
    response = push(client, slim)
    assert response.status_code == 200, response.text
    assert response.json()["manifest_sha256"] == full["manifest_sha256"]
    assert response.json()["bytes_new"] == 0
    assert opened == []


def test_lost_blob_is_repaired_by_a_push_that_carries_it(client, registry_ctx):
    """A row whose object was lost is not trusted: the next push carrying the file restores it."""
    body = push(client, fixture_carton("03")).json()
    with zipfile.ZipFile(fixture_carton("03")) as z:
        vocab = z.read("model/vocab.txt")
    sha = hashlib.sha256(vocab).hexdigest()
    assert registry_ctx.blobs.delete(sha)
    missing = client.post("/api/v1/blobs/missing", json={"sha256": [sha]}).json()["missing"]
    assert missing == [sha]
    again = push(client, fixture_carton("03"))
    assert again.status_code == 200
    assert again.json()["manifest_sha256"] == body["manifest_sha256"]
    # A known manifest: nothing new (DESIGN.md's push response); the restored file is healed.
    assert again.json()["bytes_new"] == 0 and again.json()["bytes_stored"] == 0
    assert again.json()["bytes_healed"] == len(vocab)
    assert registry_ctx.blobs.exists(sha)
    assert client.post("/api/v1/blobs/missing", json={"sha256": [sha]}).json()["missing"] == []


def test_lost_blob_is_not_a_source_for_a_push_without_it(client, registry_ctx):
    push(client, fixture_carton("03"))
    with zipfile.ZipFile(fixture_carton("03")) as z:
        sha = hashlib.sha256(z.read("model/vocab.txt")).hexdigest()
    assert registry_ctx.blobs.delete(sha)
    before = counts(registry_ctx)
    # A new carton naming the lost file without carrying it.
    src = fixture_carton("03")
    with zipfile.ZipFile(src) as z:
        manifest = z.read("MANIFEST")
    extra = b"another file\n"
    line = f"model/zz_new.txt={hashlib.sha256(extra).hexdigest()}\n".encode()
    lines = sorted([*manifest.splitlines(keepends=True), line])
    data = rebuild(
        src,
        replace={"MANIFEST": b"".join(lines)},
        drop={"model/vocab.txt"},
        extra={"model/zz_new.txt": extra},
    )
    response = push(client, data)
    assert response.status_code == 400
    assert "model/vocab.txt" in response.json()["error"]
    assert counts(registry_ctx)["cartons"] == before["cartons"]


@pytest.mark.parametrize(
    "body",
    [{"sha256": [[1]]}, {"sha256": [{}]}, {"sha256": ["ABC"]}, {"sha256": "x"}, [1], "nope"],
)
def test_missing_query_rejects_bad_input(client, body):
    response = client.post("/api/v1/blobs/missing", json=body)
    assert response.status_code == 400
    assert "error" in response.json()


def test_deeply_nested_json_is_a_400(client):
    response = client.post("/api/v1/blobs/missing", content=b"[" * 100_000)
    assert response.status_code == 400


def test_json_bodies_are_capped(client):
    response = client.post(
        "/api/v1/blobs/missing", content=b'{"sha256": [' + b" " * (17 * 1024 * 1024) + b"]}"
    )
    assert response.status_code == 413


def test_timestamps_are_utc_on_every_backend(client):
    from datetime import datetime, timedelta

    client.post("/api/v1/cartons", content=fixture_carton("02").read_bytes())
    model = client.get("/api/v1/models/selftest_identity").json()
    for value in (model["created_at"], model["versions"][0]["created_at"]):
        parsed = datetime.fromisoformat(value)
        assert parsed.utcoffset() == timedelta(0), value


def test_openapi_document_lists_the_api(client):
    response = client.get("/api/openapi/openapi.json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in ("/api/v1/cartons", "/api/v1/blobs/missing", "/api/v1/stats"):
        assert path in paths


@pytest.mark.settings(
    archive=ArchiveLimits(max_expansion_ratio=10.0, expansion_min_bytes=1024 * 1024)
)
def test_a_push_may_not_unpack_to_far_more_than_it_uploaded(client, registry_ctx):
    """Members under the per-member ratio floor still count against the whole upload."""
    from tests.helpers import make_carton

    body = make_carton({f"model/z{i}.bin": bytes(1024 * 1024) for i in range(6)}, model_name="z")
    assert len(body) < 200_000
    response = push(client, body)
    assert response.status_code == 413, response.text
    assert "REGISTRY_MAX_EXPANSION_RATIO" in response.json()["error"]
    assert counts(registry_ctx)["cartons"] == 0
    assert list(registry_ctx.blobs.iter_packs()) == []


def test_push_refuses_what_inspect_refuses(client, registry_ctx, tmp_path):
    """One tensor_data check: a numeric tensor of the wrong size and a string tensor with the
    wrong count are refused by push with the same words inspect uses; nothing is indexed."""
    import numpy as np

    from registry.carton.inspect import inspect_carton
    from registry.carton.tensor_data import (
        TensorIndexEntry,
        encode_numeric,
        encode_string_tensor,
        write_tensor_index,
    )
    from tests.helpers import make_carton

    index = write_tensor_index(
        [
            TensorIndexEntry("a", "int32", (3,), "tensor_0.bin"),
            TensorIndexEntry("b", "string", (3,), "tensor_1.toml"),
        ]
    )
    files = {
        "tensor_data/index.toml": index,
        "tensor_data/tensor_0.bin": encode_numeric(np.array([1, 2], dtype=np.int32)),
        "tensor_data/tensor_1.toml": encode_string_tensor(["x", "y"]),
    }
    body = make_carton(files, model_name="bad-tensors")
    (tmp_path / "bad.carton").write_bytes(body)
    problems = inspect_carton(tmp_path / "bad.carton")["problems"]
    assert any("needs 12 bytes, has 8" in p for p in problems), problems
    response = push(client, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert "tensor_data/tensor_0.bin" in error and "needs 12 bytes, has 8" in error
    assert "tensor_data/tensor_1.toml" in error
    assert all(p in error for p in problems)
    assert counts(registry_ctx)["cartons"] == 0
