"""The record frame of a segment file: a little-endian header, key, value and headers, CRC-checked.

Frame layout (all integers little-endian)::

    u32 length      bytes after this field and the crc (27 + key + value + headers)
    u32 crc32       zlib.crc32 of those ``length`` bytes
    u8  magic       1
    i64 offset      the record's offset, stored so it survives compaction
    i64 timestamp   milliseconds since the epoch
    i32 key_len     -1: no key
    i32 value_len   -1: no value (a tombstone)
    u16 header_count
    key bytes, value bytes, then per header: u16 name_len, u32 value_len, utf-8 name, value
"""

from __future__ import annotations

import importlib
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import NamedTuple, TypeVar

from cdc.streams.protocol import StreamRecord

MAGIC = 1
HEADER = struct.Struct("<IIBqqiiH")
PREFIX = struct.Struct("<II")
TAIL = struct.Struct("<BqqiiH")
HEADER_SIZE = HEADER.size
TAIL_SIZE = TAIL.size
MAX_FRAME_BYTES = 1 << 30
_HEADER_ITEM = struct.Struct("<HI")

Headers = tuple[tuple[str, bytes], ...]
T = TypeVar("T")
RecordBuilder = Callable[[int, bytes | None, bytes | None, int, Headers], T]
"""Builds one decoded record from (offset, key, value, timestamp_ms, headers)."""

NEED_MORE = 0
"""Decoding stopped at a partial frame (or the end of the buffer) at the returned position."""
STOPPED = 1
"""Decoding stopped at the first frame whose offset is >= the stop offset."""
FULL = 2
"""Decoding stopped after ``max_records`` records."""


NativeDecoder = Callable[
    [bytes, int, int, int, int, int, str, int, type[StreamRecord], list[StreamRecord]],
    tuple[int, int, int, tuple[int, str, int | None] | None],
]
"""``native_frames.decode_records``: ``decode_records`` with a record type, returning the damage
(position, reason, offset) it found instead of raising."""


def _native_decoder() -> NativeDecoder | None:
    try:  # native_frames.c, built by `make compiled`
        module = importlib.import_module("cdc.streams.local.native_frames")
    except ImportError:
        return None
    decoder: NativeDecoder = module.decode_records
    return decoder


native_decode_records = _native_decoder()
"""The C decoder, None where it is not built (then records decode in Python)."""


class FrameError(Exception):
    """Bytes at ``position`` are not a valid frame (garbage, bad CRC, inconsistent lengths)."""

    def __init__(self, position: int, reason: str, offset: int | None = None) -> None:
        super().__init__(f"{reason} at byte {position}")
        self.position = position
        self.reason = reason
        self.offset = offset


class FrameInfo(NamedTuple):
    """Where a frame lies in its buffer and the fields compaction and time lookups need."""

    start: int
    end: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    tombstone: bool


def encode_frame(
    offset: int,
    timestamp_ms: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes]] = (),
) -> bytes:
    """The frame bytes of one record."""
    body = TAIL.pack(
        MAGIC,
        offset,
        timestamp_ms,
        -1 if key is None else len(key),
        -1 if value is None else len(value),
        len(headers),
    )
    if key:
        body += key
    if value:
        body += value
    for name, item in headers:
        encoded = name.encode()
        body += _HEADER_ITEM.pack(len(encoded), len(item)) + encoded + bytes(item)
    return PREFIX.pack(len(body), zlib.crc32(body)) + body


def decode_frames(
    buf: bytes,
    pos: int,
    end: int,
    min_offset: int,
    stop_offset: int,
    max_records: int,
    build: RecordBuilder[T],
    out: list[T],
) -> tuple[int, int, int]:
    """Decode frames of ``buf[pos:end]`` into ``out``; skip offsets below ``min_offset``.

    Returns ``(position, next_offset, status)``: the position of the first frame not consumed,
    the offset after the last record appended (-1 if none) and NEED_MORE, STOPPED or FULL.
    Raises FrameError for damaged bytes.
    """
    unpack = HEADER.unpack_from
    crc32 = zlib.crc32
    append = out.append
    count = 0
    next_offset = -1
    while count < max_records:
        if pos + HEADER_SIZE > end:
            return pos, next_offset, NEED_MORE
        length, crc, magic, offset, ts, klen, vlen, hcount = unpack(buf, pos)
        if magic != MAGIC or length < TAIL_SIZE or length > MAX_FRAME_BYTES:
            raise FrameError(pos, "not a frame header")
        frame_end = pos + 8 + length
        if frame_end > end:
            return pos, next_offset, NEED_MORE
        if offset >= stop_offset:
            return pos, next_offset, STOPPED
        if crc32(buf[pos + 8 : frame_end]) != crc:
            raise FrameError(pos, "frame CRC mismatch", offset)
        if offset >= min_offset:
            p = pos + HEADER_SIZE
            if klen >= 0:
                key = buf[p : p + klen]
                p += klen
            else:
                key = None
            if vlen >= 0:
                value = buf[p : p + vlen]
                p += vlen
            else:
                value = None
            headers: Headers = ()
            if hcount:
                headers, p = _decode_headers(buf, p, hcount, frame_end)
            if p != frame_end or klen < -1 or vlen < -1:
                raise FrameError(pos, "frame lengths do not add up", offset)
            append(build(offset, key, value, ts, headers))
            count += 1
            next_offset = offset + 1
        pos = frame_end
    return pos, next_offset, FULL


def decode_records(
    buf: bytes, pos: int, end: int, min_offset: int, stop_offset: int, max_records: int,
    topic: str, partition: int, out: list[StreamRecord],
) -> tuple[int, int, int]:  # fmt: skip
    """``decode_frames`` into ``StreamRecord``s of ``topic`` and ``partition``: in C
    (``native_frames.c``) where it is built, else ``python_decode_records``."""
    if native_decode_records is None:
        return python_decode_records(
            buf, pos, end, min_offset, stop_offset, max_records, topic, partition, out
        )
    position, next_offset, status, error = native_decode_records(
        buf, pos, end, min_offset, stop_offset, max_records, topic, partition, StreamRecord, out
    )
    if error is not None:
        raise FrameError(*error)
    return position, next_offset, status


def python_decode_records(
    buf: bytes, pos: int, end: int, min_offset: int, stop_offset: int, max_records: int,
    topic: str, partition: int, out: list[StreamRecord],
) -> tuple[int, int, int]:  # fmt: skip
    """``decode_records`` in Python: ``decode_frames`` with a record builder."""
    build = partial(_new_record, topic, partition)
    return decode_frames(buf, pos, end, min_offset, stop_offset, max_records, build, out)


def _new_record(
    topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
    timestamp_ms: int, headers: Headers,
) -> StreamRecord:  # fmt: skip
    """``StreamRecord(...)`` without the named tuple's ``__new__``, a Python function that
    costs more than the tuple (as the Kafka reader builds its records)."""
    return tuple.__new__(
        StreamRecord, (topic, partition, offset, key, value, timestamp_ms, headers)
    )


def _decode_headers(buf: bytes, p: int, count: int, frame_end: int) -> tuple[Headers, int]:
    items = []
    for _ in range(count):
        if p + _HEADER_ITEM.size > frame_end:
            break
        name_len, value_len = _HEADER_ITEM.unpack_from(buf, p)
        p += _HEADER_ITEM.size
        name = buf[p : p + name_len].decode(errors="replace")
        p += name_len
        items.append((name, buf[p : p + value_len]))
        p += value_len
    return tuple(items), p


def scan_frames(buf: bytes, pos: int, end: int) -> Iterator[FrameInfo]:
    """Yield the complete frames of ``buf[pos:end]`` (CRC-checked); stop at a partial frame."""
    while pos + HEADER_SIZE <= end:
        length, crc, magic, offset, ts, klen, vlen, _ = HEADER.unpack_from(buf, pos)
        if magic != MAGIC or length < TAIL_SIZE or length > MAX_FRAME_BYTES:
            raise FrameError(pos, "not a frame header")
        frame_end = pos + 8 + length
        if frame_end > end:
            return
        if zlib.crc32(buf[pos + 8 : frame_end]) != crc:
            raise FrameError(pos, "frame CRC mismatch", offset)
        if TAIL_SIZE + max(klen, 0) + max(vlen, 0) > length or klen < -1 or vlen < -1:
            raise FrameError(pos, "frame lengths do not add up", offset)
        key = None if klen < 0 else buf[pos + HEADER_SIZE : pos + HEADER_SIZE + klen]
        yield FrameInfo(pos, frame_end, offset, ts, key, vlen < 0)
        pos = frame_end


def frame_length_at(buf: bytes, pos: int) -> int | None:
    """The total size of the frame starting at ``pos`` if its header is in ``buf``, else None."""
    if pos + PREFIX.size > len(buf):
        return None
    return int(PREFIX.unpack_from(buf, pos)[0]) + PREFIX.size
