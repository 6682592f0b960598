"""The segment frame codec: round trips, partial frames, and damage detection."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cdc.streams.local.frames import (
    FULL,
    NEED_MORE,
    STOPPED,
    FrameError,
    Headers,
    decode_frames,
    encode_frame,
    scan_frames,
)

Record = tuple[int, bytes | None, bytes | None, int, Headers]

records = st.tuples(
    st.integers(0, 2**62),
    st.none() | st.binary(max_size=64),
    st.none() | st.binary(max_size=300),
    st.integers(-(2**40), 2**45),
    st.lists(st.tuples(st.text(max_size=10), st.binary(max_size=20)), max_size=3).map(tuple),
)


def _as_record(offset: int, key: bytes | None, value: bytes | None, ts: int, h: Headers) -> Record:
    return (offset, key, value, ts, h)


def _decode(buf: bytes, **kwargs: int) -> tuple[list[Record], int, int]:
    out: list[Record] = []
    args = {"min_offset": 0, "stop_offset": 2**63 - 1, "max_records": 10**9, **kwargs}
    pos, _, status = decode_frames(
        buf,
        0,
        len(buf),
        args["min_offset"],
        args["stop_offset"],
        args["max_records"],
        _as_record,
        out,
    )
    return out, pos, status


@given(st.lists(records, max_size=20))
def test_frames_round_trip(rows: list[Record]) -> None:
    rows = [(i, *row[1:]) for i, row in enumerate(rows)]
    buf = b"".join(encode_frame(o, ts, k, v, h) for o, k, v, ts, h in rows)
    out, pos, status = _decode(buf)
    assert out == rows
    assert (pos, status) == (len(buf), NEED_MORE)
    assert [(f.offset, f.key, f.tombstone) for f in scan_frames(buf, 0, len(buf))] == [
        (o, k, v is None) for o, k, v, _, _ in rows
    ]


@given(st.lists(records, min_size=1, max_size=10), st.data())
def test_a_cut_buffer_stops_at_the_partial_frame(rows: list[Record], data: st.DataObject) -> None:
    frames = [encode_frame(i, r[3], r[1], r[2], r[4]) for i, r in enumerate(rows)]
    buf = b"".join(frames)
    cut = data.draw(st.integers(0, len(buf) - 1))
    out, pos, status = _decode(buf[:cut])
    whole = sum(1 for i in range(len(frames)) if sum(map(len, frames[: i + 1])) <= cut)
    assert len(out) == whole
    assert pos == sum(map(len, frames[:whole]))
    assert status == NEED_MORE


def test_stop_min_and_max_bound_the_decoding() -> None:
    buf = b"".join(encode_frame(o, 0, b"k", b"v") for o in (3, 5, 9, 10))
    assert [r[0] for r in _decode(buf, min_offset=5)[0]] == [5, 9, 10]
    out, pos, status = _decode(buf, stop_offset=9)
    assert ([r[0] for r in out], status) == ([3, 5], STOPPED)
    assert _decode(buf[pos:])[0][0][0] == 9
    assert _decode(buf, max_records=1)[2] == FULL


@given(records, st.data())
def test_damage_is_detected_never_decoded(row: Record, data: st.DataObject) -> None:
    frame = bytearray(encode_frame(row[0], row[3], row[1], row[2], row[4]))
    where = data.draw(st.integers(0, len(frame) - 1))
    frame[where] ^= 1 << data.draw(st.integers(0, 7))
    try:
        out, _, status = _decode(bytes(frame))
    except FrameError:
        return
    assert out == [] and status == NEED_MORE  # a longer length: an incomplete frame
