"""The S3 blob store against ``tests/blobstore_conformance.py``, on a real S3 server (moto's,
or ``REGISTRY_TEST_S3_ENDPOINT``); may import ``registry.blobstore`` only."""
