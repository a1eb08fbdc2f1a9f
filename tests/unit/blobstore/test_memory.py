from __future__ import annotations

import pytest

from registry.blobstore import MemoryBlobStore
from tests.blobstore_conformance import BlobStoreConformance


class TestMemoryBlobStore(BlobStoreConformance):
    @pytest.fixture
    def store(self):
        with MemoryBlobStore() as store:
            yield store
