"""Segment files, their sparse offset indexes, and the standalone segment decoder.

A partition directory holds ``<base offset, 20 digits>.log`` segment files of frames (see
``frames``) and, beside each, ``<base>.idx``: a sparse index of 24-byte entries
``i64 offset, i64 byte position, i64 max timestamp of the frames before that position``, one
about every ``index_interval_bytes``. Indexes are advisory: an entry is checked against the frame
it points at before it is trusted, so a stale or torn index only costs a longer scan.
"""

from __future__ import annotations

import bisect
import functools
import os
import struct
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

from cdc.streams.local.errors import CorruptLogError
from cdc.streams.local.frames import (
    HEADER,
    HEADER_SIZE,
    NEED_MORE,
    STOPPED,
    FrameError,
    Headers,
    decode_frames,
    frame_length_at,
    scan_frames,
)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".idx"
CLEANED_SUFFIX = ".cleaned"
INDEX_ENTRY = struct.Struct("<qqq")
READ_CHUNK_BYTES = 1 << 20

RecordTuple = tuple[int, int, bytes | None, bytes | None, Headers]
"""A decoded record for bulk readers: (offset, timestamp_ms, key, value, headers)."""


class IndexEntry(NamedTuple):
    """A frame at ``position`` has ``offset``; frames before it have timestamps <= max_ts_before."""

    offset: int
    position: int
    max_ts_before: int


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """One segment of a partition for bulk readers: its offsets ``[base_offset, end_offset)``.

    ``byte_limit`` is the committed length of the active segment (None: a closed segment, read
    it to its end). ``compacted``: offsets may have gaps. Picklable; ``records()`` decodes it.
    """

    topic: str
    partition: int
    path: str
    base_offset: int
    end_offset: int
    byte_limit: int | None
    compacted: bool

    def records(self, start: int = 0, stop: int | None = None) -> Iterator[RecordTuple]:
        """The committed records of this segment with ``start <= offset < stop`` (clamped to
        the segment's range; see ``decode_segment_file``)."""
        return decode_segment_file(
            self.path,
            self.end_offset if stop is None else min(stop, self.end_offset),
            start=max(start, self.base_offset),
            byte_limit=self.byte_limit,
            dense=not self.compacted,
        )


def segment_stem(base: int) -> str:
    """The file name of a segment without suffix."""
    return f"{base:020d}"


def log_path(directory: str, base: int) -> str:
    """Path of the segment file with ``base`` offset."""
    return os.path.join(directory, segment_stem(base) + LOG_SUFFIX)


def index_path(directory: str, base: int) -> str:
    """Path of the sparse index of the segment with ``base`` offset."""
    return os.path.join(directory, segment_stem(base) + INDEX_SUFFIX)


def list_segments(directory: str) -> list[int]:
    """Base offsets of the segment files in ``directory``, ascending."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    stem = len(LOG_SUFFIX) + 20
    return sorted(
        int(name[:20]) for name in names if len(name) == stem and name.endswith(LOG_SUFFIX)
    )


def read_index(path: str, limit_position: int | None = None) -> list[IndexEntry]:
    """The complete entries of an index file (those below ``limit_position``); [] if missing."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    usable = len(data) - len(data) % INDEX_ENTRY.size
    entries = [IndexEntry(*e) for e in INDEX_ENTRY.iter_unpack(data[:usable])]
    if limit_position is not None:
        entries = [e for e in entries if e.position < limit_position]
    return entries


def seek_position(fd: int, entries: list[IndexEntry], offset: int) -> int:
    """A verified byte position of a frame at or before ``offset`` in the open segment ``fd``."""
    i = bisect.bisect_right([e.offset for e in entries], offset) - 1
    while i >= 0:
        entry = entries[i]
        if _frame_matches(fd, entry.position, entry.offset):
            return entry.position
        i -= 1
    return 0


def _frame_matches(fd: int, position: int, offset: int) -> bool:
    if position < 0:
        return False
    head = os.pread(fd, HEADER_SIZE, position)
    if len(head) < HEADER_SIZE or HEADER.unpack_from(head)[3] != offset:
        return False
    length = frame_length_at(head, 0)
    frame = os.pread(fd, length or 0, position)
    try:
        return any(True for _ in scan_frames(frame, 0, len(frame)))
    except FrameError:
        return False


def decode_segment_file(
    path: str,
    committed_end: int,
    *,
    start: int = 0,
    byte_limit: int | None = None,
    dense: bool = False,
) -> Iterator[RecordTuple]:
    """Decode the records of one segment file with ``start <= offset < committed_end``.

    Standalone (no log handle, no journal), for parallel bulk readers such as Spark tasks; get
    the arguments from ``LocalLog.segment_files`` (``start``: the segment's base offset, as
    ``SegmentFile.records`` passes it, since a segment compaction merged into an earlier file
    may briefly still exist). Frames at or beyond ``byte_limit`` are not
    read; a damaged or partial frame before it, or (``dense``: the topic is not compacted) a
    file that ends before ``committed_end - 1``, raises CorruptLogError.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        limit = os.fstat(fd).st_size if byte_limit is None else byte_limit
        stem = path[: -len(LOG_SUFFIX)] if path.endswith(LOG_SUFFIX) else path
        pos = seek_position(fd, read_index(stem + INDEX_SUFFIX, limit), start) if start else 0
        want = READ_CHUNK_BYTES
        last = start - 1
        while pos < limit:
            buf = os.pread(fd, min(want, limit - pos), pos)
            out: list[RecordTuple] = []
            try:
                used, _, status = decode_frames(
                    buf, 0, len(buf), start, committed_end, 4096, _as_tuple, out
                )
            except FrameError as e:
                raise CorruptLogError(
                    e.reason, path=path, offset=e.offset, position=pos + e.position
                ) from None
            if out:
                last = out[-1][0]
            yield from out
            if status == STOPPED:
                return
            if status == NEED_MORE and used == 0:
                if len(buf) < min(want, limit - pos) or want >= limit - pos:
                    raise CorruptLogError("partial frame", path=path, position=pos)
                want = max(want * 2, frame_length_at(buf, 0) or 0)
                continue
            pos += used
            want = READ_CHUNK_BYTES
        if dense and last + 1 < committed_end:
            raise CorruptLogError("segment ends early", path=path, offset=last + 1, position=pos)
    finally:
        os.close(fd)


def _as_tuple(
    offset: int, key: bytes | None, value: bytes | None, ts: int, headers: Headers
) -> RecordTuple:
    return (offset, ts, key, value, headers)


def fsync_all(fds: list[int], directories: list[str]) -> None:
    """fdatasync ``fds`` and fsync ``directories``, in parallel: concurrent syncs share the
    file system's journal commits, so a transaction over many partitions costs about one."""
    jobs = [partial(os.fdatasync, fd) for fd in fds]
    jobs += [partial(fsync_directory, d) for d in directories]
    if len(jobs) == 1:
        jobs[0]()
    elif jobs:
        for future in [_sync_pool().submit(job) for job in jobs]:
            future.result()


@functools.cache
def _sync_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=8, thread_name_prefix="local-log-fsync")


def fsync_directory(directory: str) -> None:
    """Make renames and new files in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
