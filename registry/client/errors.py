"""The one error the client raises: something the user must be told about."""

from __future__ import annotations


class ClientError(Exception):
    """Something the user must be told about; ``status`` is the HTTP status when there was one."""

    def __init__(
        self,
        message: str,
        status: int | None = None,
        missing: list[str] | None = None,
        missing_chunks: list[str] | None = None,
        sha256_mismatch: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        # Files the registry reported neither in the push nor stored (``missing`` in the body).
        self.missing = missing or []
        # Chunks an assemble named that the registry does not hold (``missing_chunks``).
        self.missing_chunks = missing_chunks or []
        # An assemble's chunks do not make the file's sha256 (the registry says no more).
        self.sha256_mismatch = sha256_mismatch

    def __str__(self) -> str:
        return f"{self.message} (HTTP {self.status})" if self.status else self.message
