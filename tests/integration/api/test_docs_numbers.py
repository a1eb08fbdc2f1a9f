"""What the docs say the registry announces is what it announces (issue 26 item 12)."""

from __future__ import annotations

import json
import re

from tests.conftest import REPO_ROOT
from tests.helpers import sha as sha256_of


def test_chunk_transfer_doc_shows_the_announced_parameters(client):
    announced = client.get("/api/v1/chunking").json()
    doc = (REPO_ROOT / "docs" / "chunk-transfer.md").read_text()
    block = doc.split("## Parameters: `GET /api/v1/chunking`", 1)[1].split("```json", 1)[1]
    shown = json.loads(block.split("```", 1)[0])
    assert shown == announced
    largest = announced["max_assemble"] * announced["min_size"]
    assert largest % (1 << 30) == 0
    bound = f"{largest >> 30} GiB"
    assert f"({bound} with these parameters)" in doc
    readme = (REPO_ROOT / "README.md").read_text()
    assert f"smallest size ({bound} with the registry's defaults)" in readme
    for text in (doc, readme):  # no other bound is claimed anywhere
        claimed = re.findall(r"\((\d+ GiB) with (?:these parameters|the registry's defaults)", text)
        assert set(claimed) == {bound}


def test_a_file_stored_whole_has_no_chunks_key(client):
    data = b"small file, stored whole"
    sha = sha256_of(data)
    assert client.put(f"/api/v1/blobs/{sha}", content=data).status_code in (200, 201)
    answer = client.get(f"/api/v1/blobs/{sha}/chunks").json()
    assert answer == {"sha256": sha, "size": len(data), "chunked": False}
