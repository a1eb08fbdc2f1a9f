from __future__ import annotations

import pytest

from registry.blobstore import MemoryBlobStore
from tests.blobstore_conformance import BlobStoreConformance
from tests.helpers import memory_blob, set_memory_blob


class TestMemoryBlobStore(BlobStoreConformance):
    @pytest.fixture
    def store(self):
        with MemoryBlobStore() as store:
            yield store

    def raw_get(self, store: MemoryBlobStore, sha256: str) -> bytes | None:
        return memory_blob(store, sha256)

    def raw_set(self, store: MemoryBlobStore, sha256: str, data: bytes) -> None:
        set_memory_blob(store, sha256, data)
