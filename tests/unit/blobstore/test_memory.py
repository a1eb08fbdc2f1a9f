from __future__ import annotations

import pytest

from registry.blobstore import MemoryBlobStore
from tests import rawstore
from tests.blobstore_conformance import BlobStoreConformance


class TestMemoryBlobStore(BlobStoreConformance):
    @pytest.fixture
    def store(self):
        with MemoryBlobStore() as store:
            yield store

    def raw_get(self, store: MemoryBlobStore, key: str) -> bytes | None:
        return rawstore.raw_get(store, key)

    def raw_set(self, store: MemoryBlobStore, key: str, data: bytes) -> None:
        rawstore.raw_set(store, key, data)

    def incomplete_uploads(self, store: MemoryBlobStore) -> list[str]:
        return rawstore.incomplete_uploads(store)
