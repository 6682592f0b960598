"""``LocalLog.read_compacted`` from the segment files, building only the records that survive.

``latest.compact_records`` over ``read`` builds a record for every frame (~1.2 us each at 10 M
records of ~630 bytes, most of them superseded later). Here two passes over the range's
committed segment files (``LocalLog.segment_files``, memory-mapped) do it: the first
(``native_frames.compact_frames``, in C) walks the frames with ``decode_records``' checks (CRC,
lengths, stops) and keeps per key only where its newest frame with a value and its newest
tombstone after it lie, and each frame of a null key or an ``each_keys`` key, as
``compact_records`` keeps records; the second (``frames_at``) builds just those records. The
first pass holds no value, so the budget bounds the survivors' values as they are built (a range
whose intermediate state went over it while its survivors fit now passes), and
``CompactionOverBudget.records`` counts every frame read. Where the C module is not built,
``compact_records`` over ``read`` does it (``tests/cdc/streams/test_newest.py`` holds the two to
the same result).

Like the Spark source's (``replay.reading.local_log``) the listing is a snapshot: a segment merged
away before it is opened sends the read the cursor's way (``read``), and a mapping stays on the
file it opened. The log never shrinks a file below its committed bytes; a file shorter than its
committed length is damage.
"""

from __future__ import annotations

import importlib
import mmap
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cdc.runtime.record_heap import cycle_collector_paused
from cdc.streams.latest import HeldBudget, compact_records
from cdc.streams.local.errors import CorruptLogError
from cdc.streams.local.frames import STOPPED
from cdc.streams.local.segments import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SegmentFile,
    read_index,
    seek_position,
)
from cdc.streams.protocol import CompactedRange, StreamRecord

if TYPE_CHECKING:
    from cdc.streams.local.log import LocalLog

TAG_BITS = 40
"""A frame's place: its segment's index in the listing above this bit, its position below."""
_BATCH = 4096
"""Survivors built between two checks of the budget."""
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # (Linux: the pages read ahead in bulk)


def _native(name: str) -> Callable[..., Any] | None:
    try:  # native_frames.c, built by `make compiled`
        module = importlib.import_module("cdc.streams.local.native_frames")
    except ImportError:
        return None
    function: Callable[..., Any] = getattr(module, name)
    return function


native_compact_frames = _native("compact_frames")
"""The C first pass, None where it is not built."""
native_frames_at = _native("frames_at")
"""The C second pass (the survivors' records)."""


def newest_records(
    log: LocalLog, topic: str, partition: int, start: int, stop: int | None,
    each_keys: frozenset[bytes], budget: HeldBudget,
) -> CompactedRange:  # fmt: skip
    """``read(topic, partition, start, stop)`` compacted (``EventStream.read_compacted``)."""
    if native_compact_frames is not None:
        try:
            return _two_passes(log, topic, partition, start, stop, each_keys, budget)
        except FileNotFoundError:  # a segment merged away since the listing: ``read`` follows
            pass
    return compact_records(log.read(topic, partition, start, stop), each_keys, budget)


def _two_passes(
    log: LocalLog, topic: str, partition: int, start: int, stop: int | None,
    each_keys: frozenset[bytes], budget: HeldBudget,
) -> CompactedRange:  # fmt: skip
    assert native_compact_frames is not None
    live: dict[bytes, int] = {}
    gone: dict[bytes, int] = {}
    each: list[int] = []
    maps: list[mmap.mmap | bytes] = []
    records = 0
    try:
        for index, segment in enumerate(log.segment_files(topic, partition, start, stop)):
            low = max(start, segment.base_offset)
            high = segment.end_offset if stop is None else min(stop, segment.end_offset)
            mapped, limit, pos = _mapped(segment, low)
            maps.append(mapped)
            where, last, status, count, damage = native_compact_frames(
                mapped, pos, limit, low, high, index << TAG_BITS, each_keys, live, gone, each
            )
            records += count
            if isinstance(mapped, mmap.mmap):  # out of the task's RSS until the second pass
                mapped.madvise(mmap.MADV_DONTNEED)
            if damage is not None:
                raise CorruptLogError(damage[1], path=segment.path, offset=damage[2],
                                      position=damage[0])  # fmt: skip
            if status != STOPPED and where < limit:
                raise CorruptLogError("partial frame", path=segment.path, position=where)
            reached = last if last >= 0 else low  # the next offset after the records read
            if not segment.compacted and reached < high:
                raise CorruptLogError(
                    "segment ends early", path=segment.path, offset=reached, position=where
                )
        frames = _Frames(topic, partition, maps)
        kept: dict[bytes, StreamRecord] = {}
        held = 0
        keys = list(live)
        # The budget bounds the survivors' values as they are built (the first pass holds no
        # value); records hold no cycles (``record_heap``).
        with cycle_collector_paused():
            for first in range(0, len(keys), _BATCH):
                batch = keys[first : first + _BATCH]
                for key, record in zip(batch, frames([live[k] for k in batch]), strict=True):
                    kept[key] = record
                    held += len(record.value or b"")
                budget.check(held, records, len(live))
            ended = dict(zip(gone, frames(list(gone.values())), strict=True))
            return CompactedRange(kept, ended, frames(each))
    finally:
        for mapped in maps:
            if isinstance(mapped, mmap.mmap):
                mapped.close()


def _mapped(segment: SegmentFile, low: int) -> tuple[mmap.mmap | bytes, int, int]:
    """The committed bytes of ``segment`` mapped, their length, and the position of a frame at
    or before offset ``low`` to start from."""
    fd = os.open(segment.path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        limit = size if segment.byte_limit is None else segment.byte_limit
        if size < limit:
            raise CorruptLogError(
                "segment is shorter than its committed length", path=segment.path, position=size
            )
        mapped: mmap.mmap | bytes = b""
        if limit:
            mapped = mmap.mmap(fd, limit, flags=mmap.MAP_SHARED | _POPULATE, prot=mmap.PROT_READ)
        stem = segment.path.removesuffix(LOG_SUFFIX)
        pos = seek_position(fd, read_index(stem + INDEX_SUFFIX, limit), low) if low else 0
        return mapped, limit, pos
    finally:
        os.close(fd)


class _Frames:
    """Builds the records of frames placed by the first pass (``TAG_BITS``)."""

    def __init__(self, topic: str, partition: int, buffers: list[mmap.mmap | bytes]) -> None:
        self.topic, self.partition, self.buffers = topic, partition, buffers

    def __call__(self, places: list[int]) -> list[StreamRecord]:
        assert native_frames_at is not None  # built with compact_frames
        try:
            records: list[StreamRecord] = native_frames_at(
                self.buffers, places, self.topic, self.partition, StreamRecord
            )
        except ValueError as e:  # the first pass checked them: the files changed since
            raise CorruptLogError(str(e), topic=self.topic, partition=self.partition) from None
        return records
