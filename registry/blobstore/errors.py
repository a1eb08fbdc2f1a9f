"""What the blob store raises, in its own words (it imports nothing above it).

``registry.http.errors.STATUS_BY_ERROR`` maps these to statuses like every domain error;
the services let them through, or add what they know (a push names the member whose
bytes did not match). A bad digest or range argument is a caller's bug: ``ValueError``.
"""

from __future__ import annotations


class BlobStoreError(Exception):
    """Base of the blob store's errors; ``message`` says what went wrong."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class BlobNotFound(BlobStoreError):
    """No blob with that digest in the store."""

    def __init__(self, sha256: str) -> None:
        super().__init__(f"blob {sha256} not found")
        self.sha256 = sha256


class BlobDigestMismatch(BlobStoreError):
    """The bytes of a put do not hash to the digest they were put under; nothing was stored."""

    def __init__(self, expected: str, actual: str, size: int) -> None:
        super().__init__(
            f"digest mismatch: expected sha256 {expected}, but the {size} bytes received "
            f"hash to {actual}"
        )
        self.expected = expected
        self.actual = actual


class BlobStoreUnavailable(BlobStoreError):
    """The backend cannot be reached or cannot be written; retrying later may succeed."""


class PackNotFound(BlobStoreUnavailable):
    """A pack the index names is not in the store: data was lost (run fsck), not a 404."""

    def __init__(self, name: str) -> None:
        super().__init__(f"pack {name} is missing from the blob store (run fsck)")
        self.name = name
