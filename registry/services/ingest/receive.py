"""Walk a carton zip as its bytes arrive and write every member through the chunk store."""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass

from registry.carton.paths import CARTON_TOML, LINKS_NAME, MANIFEST_NAME, TENSOR_DIR
from registry.carton.streams import CHUNK, Readable
from registry.carton.zipstream import StreamedCarton, ZipStream, check_carton
from registry.services.chunkstore.files import FileWriter
from registry.services.chunkstore.layout import FileLayout
from registry.services.chunkstore.writer import PackSession
from registry.services.context import RegistryContext

READ_SIZE = CHUNK
CAPTURE_MAX_BYTES = 64 * 1024 * 1024
"""Bytes of carton.toml and tensor_data TOML kept while they stream, so checks need no re-read."""


@dataclass(frozen=True)
class Received:
    carton: StreamedCarton
    layouts: dict[str, FileLayout]  # zip entry path -> what its bytes are and where they went
    captured: dict[str, bytes]  # zip entry path -> bytes, for the files the checks read


def _worth_capturing(path: str) -> bool:
    return path == CARTON_TOML or (path.startswith(TENSOR_DIR) and path.endswith(".toml"))


def receive(ctx: RegistryContext, source: Readable, packs: PackSession) -> Received:
    """Every member hashed, chunked and written as it streams; then the zip's own checks.

    Nothing is trusted before ``check_carton`` returns: the central directory,
    CRCs and sizes are checked against what streamed, and MANIFEST against the
    members. What was written before a failure is the caller's to discard.
    """
    stream = ZipStream(source, ctx.archive_limits)
    layouts: dict[str, Future[FileLayout]] = {}
    captured: dict[str, bytes] = {}
    budget = CAPTURE_MAX_BYTES
    unsettled: deque[Future[FileLayout]] = deque()  # files whose last chunks may be in work
    for entry in stream:
        while unsettled and unsettled[0].done():
            unsettled.popleft().result()  # a file that failed stops the push here
        if entry.is_dir or entry.path in (MANIFEST_NAME, LINKS_NAME):
            continue  # MANIFEST and LINKS are read by the stream itself, never stored
        writer = FileWriter(packs, crc=False)  # the zip reader checks the member's CRC-32
        keep: list[bytes] | None = [] if _worth_capturing(entry.path) else None
        while True:
            data = entry.read(READ_SIZE)
            if not data:
                break
            writer.write(data)
            if keep is not None:
                keep.append(data)
                if writer.size > budget:
                    keep = None  # read back from the store if a check needs it
        layouts[entry.path] = writer.close_later(crc32=entry.crc32)
        unsettled.append(layouts[entry.path])
        if keep is not None:
            captured[entry.path] = b"".join(keep)
            budget -= writer.size
    central = stream.finish()
    carton = check_carton(stream.entries, central, ctx.archive_limits)
    return Received(carton, {path: done.result() for path, done in layouts.items()}, captured)
