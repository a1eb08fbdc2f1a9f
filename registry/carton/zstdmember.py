"""Decoding one zip member's zstd data, shared by the random-access reader
(``member``) and the streaming one (``zipmember``).

A member holds one or more zstd frames (a frame may lack its content size), or
nothing at all (an empty member); input that stops inside a frame is
truncated. When the member's sizes follow in a data descriptor, its data is one
frame and whatever follows it belongs to the archive, so it is handed back.
"""

from __future__ import annotations

from collections.abc import Callable

from backports.zstd import ZstdDecompressor, ZstdError

from .errors import CartonFormatError


class ZstdMemberDecoder:
    """Uncompressed bytes of one member, a step at a time."""

    def __init__(
        self,
        read: Callable[[], bytes],
        fail: Callable[[str], CartonFormatError],
        give_back: Callable[[bytes], None] | None = None,
    ) -> None:
        """``read``: the member's next compressed bytes (b"" at its end); ``fail``: the
        error for a problem; ``give_back``: set when the data is one frame and what
        follows it is not the member's."""
        self._read = read
        self._fail = fail
        self._give_back = give_back
        self._decoder = ZstdDecompressor()
        self._fed = False

    def step(self, n: int) -> bytes | None:
        """Up to ``n`` bytes (maybe b""), or None at the end of the member's data."""
        d = self._decoder
        try:
            if d.eof:
                rest = d.unused_data
                if self._give_back is not None:
                    self._give_back(rest)
                    return None
                if not rest:
                    rest = self._read()
                    if not rest:
                        return None
                d = self._decoder = ZstdDecompressor()  # the next frame
                return d.decompress(rest, n)
            if d.needs_input:
                chunk = self._read()
                if not chunk:
                    if self._fed:
                        raise self._fail("zstd stream is truncated")
                    return None  # zero compressed bytes: an empty member
                self._fed = True
                return d.decompress(chunk, n)
            return d.decompress(b"", n)
        except ZstdError as exc:
            raise self._fail(f"corrupt zstd data ({exc})") from None
