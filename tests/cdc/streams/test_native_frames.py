"""The C frame decoder (``native_frames.c``) against its Python twin: the same records, the same
stops and the same damage found, on whole, cut, damaged and forged buffers."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc.streams.local import frames
from cdc.streams.local.frames import FrameError, Headers, encode_frame, python_decode_records
from cdc.streams.protocol import StreamRecord

pytestmark = pytest.mark.skipif(
    frames.native_decode_records is None,
    reason="native_frames is not built (make compiled builds it; make pure removes it)",
)

Row = tuple[bytes | None, bytes | None, int, Headers]
rows = st.tuples(
    st.none() | st.binary(max_size=40),
    st.none() | st.binary(max_size=200),
    st.integers(-(2**40), 2**45),
    st.lists(st.tuples(st.text(max_size=8), st.binary(max_size=16)), max_size=3).map(tuple),
)
Outcome = tuple[list[StreamRecord], tuple[int, int, int] | tuple[int, str, int | None]]


def _run(decode: object, buf: bytes, lo: int, stop: int, most: int) -> Outcome:
    out: list[StreamRecord] = []
    try:
        returned = decode(buf, 0, len(buf), lo, stop, most, "orders", 3, out)  # type: ignore[operator]
    except FrameError as e:
        return out, (e.position, e.reason, e.offset)
    return out, returned


def _both(buf: bytes, lo: int = 0, stop: int = 2**63 - 1, most: int = 10**9) -> Outcome:
    native = _run(frames.decode_records, buf, lo, stop, most)
    assert native == _run(python_decode_records, buf, lo, stop, most)
    assert all(type(r) is StreamRecord for r in native[0])
    return native


def _log(items: list[Row], first: int = 0) -> bytes:
    return b"".join(encode_frame(first + i, ts, k, v, h) for i, (k, v, ts, h) in enumerate(items))


def _forged(offset: int, klen: int, vlen: int, hcount: int, body: bytes) -> bytes:
    """A frame whose length fields say what they like, with a valid CRC."""
    tail = struct.pack("<BqqiiH", 1, offset, 7, klen, vlen, hcount) + body
    return struct.pack("<II", len(tail), zlib.crc32(tail)) + tail


@given(st.lists(rows, max_size=25), st.integers(0, 30), st.integers(0, 30), st.integers(0, 30))
def test_the_same_records_and_stops(items: list[Row], lo: int, stop: int, most: int) -> None:
    buf = _log(items, first=2)
    out, returned = _both(buf, lo, stop, most)
    assert [r.offset for r in out] == [o for o in range(2, 2 + len(items)) if lo <= o < stop][:most]
    assert all(r.topic == "orders" and r.partition == 3 for r in out)
    assert returned[0] <= len(buf)


@given(st.lists(rows, min_size=1, max_size=8), st.data())
def test_the_same_on_a_cut_buffer(items: list[Row], data: st.DataObject) -> None:
    buf = _log(items)
    _both(buf[: data.draw(st.integers(0, len(buf)))])


@given(st.lists(rows, min_size=1, max_size=6), st.data())
def test_the_same_damage_found(items: list[Row], data: st.DataObject) -> None:
    buf = bytearray(_log(items))
    for _ in range(data.draw(st.integers(1, 3))):
        buf[data.draw(st.integers(0, len(buf) - 1))] ^= 1 << data.draw(st.integers(0, 7))
    _both(bytes(buf), lo=data.draw(st.integers(0, 3)))


@given(
    st.integers(-3, 12), st.integers(-3, 12), st.integers(0, 3), st.binary(max_size=40),
    st.integers(0, 1),
)  # fmt: skip
def test_the_same_verdict_on_forged_lengths(
    klen: int, vlen: int, hcount: int, body: bytes, lo: int
) -> None:
    """Lengths that do not add up (a CRC cannot catch what the writer got wrong), headers
    promised and missing, and a frame skipped below ``min_offset`` without its lengths read."""
    buf = _forged(0, klen, vlen, hcount, body) + encode_frame(1, 0, b"k", b"v")
    out, _ = _both(buf, lo=lo)
    if lo == 1:
        assert [r.offset for r in out] == [1]


def test_headers_promised_beyond_the_frame_end_where_python_stops_too() -> None:
    header = struct.pack("<HI", 1, 2) + b"nxy"
    _, returned = _both(_forged(0, 1, 1, 2, b"kv" + header))  # two promised, one there
    assert returned[2] != 3 and isinstance(returned[1], int)
    _, returned = _both(_forged(0, 1, 1, 1, b"kv" + header[:-1]))  # its value cut short
    assert returned[1] == "frame lengths do not add up"


def test_undecodable_header_names_are_replaced_as_python_does() -> None:
    buf = encode_frame(0, 0, b"k", b"v", (("x", b"1"),)).replace(b"x1", b"\xff1")
    tail = buf[8:]
    buf = struct.pack("<II", len(tail), zlib.crc32(tail)) + tail
    (record,), _ = _both(buf)
    assert record.headers == (("\ufffd", b"1"),)


def test_bad_arguments_are_refused() -> None:
    native = frames.native_decode_records
    assert native is not None
    buf = encode_frame(0, 0, b"k", b"v")
    with pytest.raises(ValueError, match="outside the buffer"):
        native(buf, 0, len(buf) + 1, 0, 10, 10, "t", 0, StreamRecord, [])
    with pytest.raises(TypeError, match="tuple type"):
        native(buf, 0, len(buf), 0, 10, 10, "t", 0, dict, [])  # type: ignore[arg-type]
