"""The one zstd member decoder both zip readers use: frames, empty members, truncation,
corruption, and a descriptor member's single frame (what follows is handed back)."""

from __future__ import annotations

import pytest
from backports.zstd import compress

from registry.carton.errors import CartonFormatError
from registry.carton.zstdmember import ZstdMemberDecoder


def feed(data: bytes, piece: int = 7):
    pieces = [data[i : i + piece] for i in range(0, len(data), piece)]
    return lambda: pieces.pop(0) if pieces else b""


def fail(what: str) -> CartonFormatError:
    return CartonFormatError(f"member: {what}")


def decode(decoder: ZstdMemberDecoder) -> bytes:
    out = []
    while (step := decoder.step(5)) is not None:
        out.append(step)
    return b"".join(out)


def test_several_frames_make_one_member():
    data = compress(b"first frame, ") + compress(b"second frame")
    assert decode(ZstdMemberDecoder(feed(data), fail)) == b"first frame, second frame"


def test_zero_compressed_bytes_are_an_empty_member():
    assert decode(ZstdMemberDecoder(feed(b""), fail)) == b""


@pytest.mark.parametrize("frames", [1, 2])
def test_input_that_stops_inside_a_frame_is_truncated(frames):
    whole = compress(b"x" * 1000 + bytes(range(256)))
    data = whole * (frames - 1) + whole[:-4]
    with pytest.raises(CartonFormatError, match="member: zstd stream is truncated"):
        decode(ZstdMemberDecoder(feed(data), fail))


def test_corrupt_data_names_the_member():
    with pytest.raises(CartonFormatError, match="member: corrupt zstd data"):
        decode(ZstdMemberDecoder(feed(b"\x28\xb5\x2f\xfd" + b"\xff" * 20), fail))


def test_a_descriptor_members_frame_hands_back_what_follows():
    returned: list[bytes] = []
    data = compress(b"the member") + b"PK\x07\x08 descriptor and the next header"
    decoder = ZstdMemberDecoder(feed(data, piece=len(data)), fail, give_back=returned.append)
    assert decode(decoder) == b"the member"
    assert returned == [b"PK\x07\x08 descriptor and the next header"]
