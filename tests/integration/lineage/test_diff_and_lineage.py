"""Diff and lineage through the API on both backend pairs, with real safetensors files:
a fine-tune retraining two tensors, one adding a tensor, one renaming the file."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import select

from registry.chunking import chunk_hash, iter_chunks
from registry.db.tables import CartonLineage
from tests.helpers import carton_toml, sha
from tests.integration.lineage.weights import (
    ADDED,
    LAYOUT,
    RENAMED,
    RETRAINED,
    WEIGHTS,
    Version,
    carton_with,
    data_ranges,
    family,
)

MODEL = "llama-mini"


@pytest.fixture(scope="module")
def versions() -> dict[str, Version]:
    return family()


def push(client, carton: bytes) -> dict:
    r = client.post("/api/v1/cartons", content=carton)
    assert r.status_code == 201, r.text
    return r.json()


def get_diff(client, old: str, new: str, **params: str) -> dict:
    r = client.get("/api/v1/diff", params={"from": old, "to": new, **params})
    assert r.status_code == 200, r.text
    return r.json()


def lineage(client, manifest: str) -> dict:
    r = client.get(f"/api/v1/cartons/{manifest}/lineage")
    assert r.status_code == 200, r.text
    return r.json()


def chunks(ctx, data: bytes) -> list[tuple[str, int]]:
    return [(chunk_hash(c), len(c)) for c in iter_chunks(ctx.chunk_params, iter([data]))]


def shared(ctx, new: bytes, old: bytes) -> int:
    """Bytes of ``new`` whose chunks ``old`` also has, as the registry cuts them."""
    if new == old:
        return len(new)
    have = {h for h, _ in chunks(ctx, old)}
    return sum(n for h, n in chunks(ctx, new) if h in have)


def by_path(result: dict) -> dict[str, dict]:
    return {f["path"]: f for f in result["files"]}


def statuses(file: dict) -> dict[str, str]:
    return {t["name"]: t["status"] for t in file["tensors"]}


@pytest.fixture
def pushed(client, versions) -> dict[str, dict]:
    return {key: push(client, v.carton(MODEL)) for key, v in versions.items()}


@pytest.fixture
def base_pushed(client, versions) -> dict:
    """Only ``MODEL:1``: what the bad-request tests refer to (each case is a test of its
    own, and pushing the whole family for each took most of their time)."""
    return push(client, versions["base"].carton(MODEL))


def test_fine_tune_diff_names_the_retrained_tensors(client, registry_ctx, versions, pushed):
    base, tuned = versions["base"].bytes(), versions["tuned"].bytes()
    result = get_diff(client, f"{MODEL}:1", f"{MODEL}:2", exact="true")
    assert (result["from"], result["to"]) == (
        pushed["base"]["manifest_sha256"],
        pushed["tuned"]["manifest_sha256"],
    )
    files = by_path(result)
    assert files["carton.toml"]["status"] == "same"
    weights = files[WEIGHTS]
    assert weights["status"] == "changed"
    assert weights["from"] == {"sha256": sha(base), "size": len(base)}
    assert weights["to"] == {"sha256": sha(tuned), "size": len(tuned)}
    expected = {name: "changed" if name in RETRAINED else "same" for name in LAYOUT}
    assert statuses(weights) == expected  # exact: only what really changed
    assert {t["name"]: (t["dtype"], t["shape"]) for t in weights["tensors"]} == {
        name: ("F32", list(shape)) for name, shape in LAYOUT.items()
    }
    assert weights["bytes_shared"] == shared(registry_ctx, tuned, base)
    toml = len(carton_toml(MODEL))
    assert result["bytes_shared"] == weights["bytes_shared"] + toml
    assert result["bytes_changed"] == len(tuned) - weights["bytes_shared"]
    assert result["summary"] == {"added": 0, "removed": 0, "changed": 1, "same": 1}
    assert result["toml"] == {}

    # by chunks: every retrained tensor is changed; another one only when it lies within a
    # chunk's reach of a retrained one (a chunk straddles them); the rest are same
    rough = statuses(by_path(get_diff(client, f"{MODEL}:1", f"{MODEL}:2"))[WEIGHTS])
    ranges, reach = data_ranges(versions["tuned"]), registry_ctx.chunk_params.max_size
    near = {
        name
        for name, (start, end) in ranges.items()
        for r in RETRAINED
        if start < ranges[r][1] + reach and end > ranges[r][0] - reach
    }
    changed = {n for n, s in rough.items() if s == "changed"}
    assert set(RETRAINED) <= changed <= near
    assert all(rough[n] == "same" for n in set(ranges) - near)
    assert len(near) < len(ranges) / 2  # the check above says something


def test_added_tensor_and_renamed_file(client, registry_ctx, versions, pushed):
    result = get_diff(client, f"{MODEL}:2", f"{MODEL}:3", exact="1")
    weights = by_path(result)[WEIGHTS]
    added = {t["name"]: t for t in weights["tensors"] if t["status"] != "same"}
    assert list(added) == [ADDED]
    assert added[ADDED] | {} == {
        "name": ADDED,
        "status": "added",
        "dtype": "F32",
        "shape": [64, 512],
        "from_dtype": None,
        "from_shape": None,
    }
    grown, tuned = versions["grown"].bytes(), versions["tuned"].bytes()
    assert weights["bytes_shared"] == shared(registry_ctx, grown, tuned)

    renamed = get_diff(client, f"{MODEL}:3", pushed["renamed"]["manifest_sha256"][:12])
    files = by_path(renamed)
    assert files[WEIGHTS]["status"] == "removed" and files[WEIGHTS]["renamed_to"] == RENAMED
    assert files[RENAMED]["status"] == "added" and files[RENAMED]["renamed_from"] == WEIGHTS
    assert files[RENAMED]["bytes_shared"] == len(grown)  # the same bytes at another path
    assert renamed["bytes_changed"] == 0 and renamed["bytes_shared"] == len(grown) + len(
        carton_toml(MODEL)
    )
    assert files[RENAMED]["tensors"] is None  # tensors are listed for changed files


def test_lineage_is_recorded_at_push_and_points_at_the_closest_ancestor(
    client, registry_ctx, versions, pushed
):
    manifests = {key: body["manifest_sha256"] for key, body in pushed.items()}
    with registry_ctx.sessions() as session:  # recorded by the pushes, not by reading
        rows = {r.manifest_sha256: r for r in session.scalars(select(CartonLineage))}
    assert set(rows) == set(manifests.values())
    assert rows[manifests["base"]].parent_sha256 is None
    expected_parents = {"tuned": "base", "grown": "tuned", "renamed": "grown"}
    for child, parent in expected_parents.items():
        body = lineage(client, manifests[child])
        assert body["parent"]["manifest_sha256"] == manifests[parent]
        result = get_diff(client, manifests[parent], manifests[child])
        assert body["parent"]["bytes_shared"] == result["bytes_shared"]
        total = result["bytes_shared"] + result["bytes_changed"]
        assert body["parent"]["share"] == pytest.approx(result["bytes_shared"] / total)
        assert (body["parent"]["model_name"], body["parent"]["version"]) == (
            MODEL,
            list(manifests).index(parent) + 1,
        )
    assert lineage(client, manifests["renamed"])["parent"]["share"] == 1.0
    children = lineage(client, manifests["base"])["children"]
    assert [c["manifest_sha256"] for c in children] == [manifests["tuned"]]
    assert lineage(client, manifests["renamed"])["children"] == []


def test_ties_go_to_the_older_carton(client, versions):
    weights = versions["base"]
    first = push(client, weights.carton("first"))["manifest_sha256"]
    push(client, weights.carton("second"))
    third = push(client, weights.carton("third"))["manifest_sha256"]
    assert lineage(client, third)["parent"]["manifest_sha256"] == first
    fresh = np.random.default_rng(99).standard_normal((300, 300)).astype(np.float32)
    unrelated = push(client, Version({"x": fresh}).carton("unrelated"))
    assert lineage(client, unrelated["manifest_sha256"])["parent"] is None


def test_deleting_the_parent_recomputes_its_children(client, registry_ctx, pushed):
    manifests = {key: body["manifest_sha256"] for key, body in pushed.items()}
    r = client.delete(f"/api/v1/models/{MODEL}/versions/2")  # "tuned", the parent of "grown"
    assert r.status_code == 200 and r.json()["carton_deleted"], r.text
    with registry_ctx.sessions() as session:
        parents = set(session.scalars(select(CartonLineage.parent_sha256)))
        assert manifests["tuned"] not in parents  # nothing points at a gone carton
        row = session.get(CartonLineage, manifests["grown"])
        assert row is not None and row.parent_sha256 == manifests["base"]  # recomputed
    body = lineage(client, manifests["grown"])
    assert body["parent"]["manifest_sha256"] == manifests["base"]
    assert [c["manifest_sha256"] for c in lineage(client, manifests["base"])["children"]] == [
        manifests["grown"]
    ]
    r = client.get(f"/api/v1/cartons/{manifests['tuned']}/lineage")
    assert r.status_code == 404


def test_lineage_missing_row_is_computed_when_read(client, registry_ctx, pushed):
    manifests = {key: body["manifest_sha256"] for key, body in pushed.items()}
    with registry_ctx.transaction() as session:
        session.query(CartonLineage).delete()
    body = lineage(client, manifests["grown"][:10])
    assert body["manifest_sha256"] == manifests["grown"]
    assert body["parent"]["manifest_sha256"] == manifests["tuned"]


def test_toml_changes_side_by_side(client, versions):
    weights = versions["base"].bytes()
    push(client, carton_with({WEIGHTS: weights}, carton_toml("tomly")))
    changed = carton_toml("tomly").replace(b"runner_name = 'noop'", b"runner_name = 'torchscript'")
    changed += b"\n[[input]]\nname = 'tokens'\ndtype = 'int64'\nshape = [1, 128]\n"
    push(client, carton_with({WEIGHTS: weights}, changed))
    result = get_diff(client, "tomly:1", "tomly")
    assert set(result["toml"]) == {"runner", "inputs"}
    assert result["toml"]["runner"]["from"]["runner_name"] == "noop"
    assert result["toml"]["runner"]["to"]["runner_name"] == "torchscript"
    assert result["toml"]["inputs"] == {
        "from": [],
        "to": [{"name": "tokens", "dtype": "int64", "shape": [1, 128], "description": None}],
    }
    assert by_path(result)[WEIGHTS]["status"] == "same"


@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({"from": "nope:1", "to": "nope:2"}, 404),
        ({"from": "llama-mini:99", "to": "llama-mini:1"}, 404),
        ({"from": "llama-mini:x", "to": "llama-mini:1"}, 400),
        ({"from": "a@b:c", "to": "llama-mini:1"}, 400),
        ({"to": "llama-mini:1"}, 400),
        ({"from": "llama-mini:1", "to": "llama-mini:1", "exact": "maybe"}, 400),
        ({"from": "0" * 64, "to": "llama-mini:1"}, 404),
    ],
)
def test_bad_diff_requests_are_4xx_json(client, base_pushed, params, status):
    r = client.get("/api/v1/diff", params=params)
    assert r.status_code == status, r.text
    assert "error" in r.json()


def test_bad_lineage_requests_are_4xx_json(client, base_pushed):
    for ref, status in (("zz", 400), ("0" * 64, 404), ("00000000", 404)):
        r = client.get(f"/api/v1/cartons/{ref}/lineage")
        assert r.status_code == status, (ref, r.text)
        assert "error" in r.json()
