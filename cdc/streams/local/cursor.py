"""The read side of one partition: committed records from a position onwards, across segments.

A cursor never reads bytes beyond the committed state it is given (the committed length of the
active segment; closed segments are complete), so it cannot see frames of open or aborted
transactions. Segment files may be swapped by compaction while it reads: every file holding an
offset holds the same record there, so the cursor re-resolves its segment when its file was
replaced or deleted, and otherwise moves to the next segment in the listing.
"""

from __future__ import annotations

import bisect
import os

from cdc.streams.local.errors import CorruptLogError
from cdc.streams.local.frames import (
    FULL,
    HEADER_SIZE,
    NEED_MORE,
    FrameError,
    decode_records,
    frame_length_at,
    scan_frames,
)
from cdc.streams.local.journal import PartitionState
from cdc.streams.local.segments import (
    READ_CHUNK_BYTES,
    index_path,
    list_segments,
    log_path,
    read_index,
    seek_position,
)
from cdc.streams.protocol import StreamRecord

_RETRIES = 8


class PartitionCursor:
    """Reads one partition's committed records in offset order; ``position`` is the next offset.

    ``dense``: offsets have no gaps (the topic is not compacted), so a closed segment that ends
    before the next one starts was truncated and is reported as corrupt.
    """

    def __init__(
        self, directory: str, topic: str, partition: int, position: int, *, dense: bool = False
    ) -> None:
        self.directory = directory
        self.dense = dense
        self.topic = topic
        self.partition = partition
        self.position = position
        self._fd = -1
        self._base = -1
        self._bases: list[int] = []
        self._ino = 0
        self._pos = 0
        self._buf = b""
        self._buf_start = 0

    def read(self, view: PartitionState, max_records: int, out: list[StreamRecord]) -> int:
        """Append up to ``max_records`` records with offsets below ``view.end`` to ``out``."""
        count = 0
        while count < max_records and self.position < view.end:
            if self._fd < 0 and not self._locate(view):
                break
            limit = view.segment_bytes if self._base == view.segment_base else None
            n, status = self._read_segment(view.end, limit, max_records - count, out)
            count += n
            if status != NEED_MORE or limit is not None or not self._advance(view):
                break
        return count

    def _read_segment(
        self, stop: int, limit: int | None, max_n: int, out: list[StreamRecord]
    ) -> tuple[int, int]:
        n = 0
        while n < max_n:
            rel = self._pos - self._buf_start
            if not 0 <= rel < len(self._buf):
                if not self._fill(limit, 0):
                    return n, NEED_MORE
                rel = 0
            before = len(out)
            try:
                used, nxt, status = decode_records(
                    self._buf, rel, len(self._buf), self.position, stop, max_n - n,
                    self.topic, self.partition, out,
                )  # fmt: skip
            except FrameError as e:
                raise self._corrupt(e.reason, e.offset, self._buf_start + e.position) from None
            n += len(out) - before
            self._pos = self._buf_start + used
            if nxt >= 0:
                self.position = nxt
            if status != NEED_MORE:
                return n, status
            if used < len(self._buf):
                need = frame_length_at(self._buf, used) or HEADER_SIZE
                if not self._fill(limit, need):
                    raise self._corrupt("partial frame", None, self._pos)
        return n, FULL

    def _fill(self, limit: int | None, need: int) -> bool:
        """Buffer bytes from ``_pos`` (at least ``need``); False if there are not enough."""
        size = max(READ_CHUNK_BYTES, need)
        if limit is not None:
            if self._pos >= limit:
                return False
            size = min(size, limit - self._pos)
        data = os.pread(self._fd, size, self._pos)
        if limit is not None and len(data) < size:
            end = self._pos + len(data)
            raise self._corrupt("segment is shorter than its committed length", None, end)
        if not data or len(data) < need:
            return False
        self._buf = data
        self._buf_start = self._pos
        return True

    def _locate(self, view: PartitionState) -> bool:
        """Open the segment holding ``position`` (the first one if it precedes the log start)."""
        for _ in range(_RETRIES):
            self._bases = bases = _committed_segments(self.directory, view)
            if not bases:
                if view.end > 0:
                    raise self._corrupt("committed partition has no segment files", None, None)
                return False
            i = bisect.bisect_right(bases, self.position) - 1
            if i < 0:
                self.position = bases[0]
                i = 0
            if self._open(bases[i]):
                return True
        raise self._corrupt("segment files keep disappearing", None, None)

    def _advance(self, view: PartitionState) -> bool:
        """After the end of a closed segment: continue in the next one.

        A listing of committed segments can only lack segments created after it, and those
        come last (names are never reused), so the cached listing is used while it has a later
        segment (if compaction merged that one away, opening it fails and the position is
        re-resolved). A fresh listing may already miss segments merged into the current file,
        so then the current file must still be the one that was read.
        """
        current = self._base
        later = [b for b in self._bases if b > current]
        if not later:
            self._bases = _committed_segments(self.directory, view)
            try:
                replaced = os.stat(log_path(self.directory, current)).st_ino != self._ino
            except FileNotFoundError:
                replaced = True
            if replaced:
                self.close()
                return self._locate(view)
            later = [b for b in self._bases if b > current]
            if not later:
                raise self._corrupt("segment missing after a closed segment", None, None)
        if self.dense and self.position < later[0]:
            raise self._corrupt(f"segment ends before offset {later[0]}", None, None)
        self.close()
        self.position = max(self.position, later[0])
        return self._open(later[0]) or self._locate(view)

    def _open(self, base: int) -> bool:
        try:
            fd = os.open(log_path(self.directory, base), os.O_RDONLY)
        except FileNotFoundError:
            return False
        self._fd = fd
        self._base = base
        self._ino = os.fstat(fd).st_ino
        entries = read_index(index_path(self.directory, base))
        self._pos = seek_position(fd, entries, self.position) if entries else 0
        self._buf = b""
        self._buf_start = 0
        return True

    def _corrupt(self, reason: str, offset: int | None, position: int | None) -> CorruptLogError:
        path = log_path(self.directory, self._base) if self._base >= 0 else self.directory
        return CorruptLogError(
            reason,
            path=path,
            topic=self.topic,
            partition=self.partition,
            offset=self.position if offset is None else offset,
            position=position,
        )

    def close(self) -> None:
        """Close the open segment file."""
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = -1
        self._buf = b""


def _committed_segments(directory: str, view: PartitionState) -> list[int]:
    return [b for b in list_segments(directory) if b <= view.segment_base]


def offset_for_time(directory: str, view: PartitionState, timestamp_ms: int) -> int | None:
    """The first committed offset with timestamp >= ``timestamp_ms``, or None."""
    for base in list_segments(directory):
        if base > view.segment_base:
            break
        limit = view.segment_bytes if base == view.segment_base else None
        try:
            fd = os.open(log_path(directory, base), os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            entries = read_index(index_path(directory, base), limit)
            j = bisect.bisect_left([e.max_ts_before for e in entries], timestamp_ms)
            start = seek_position(fd, entries[:j], entries[j - 1].offset) if j > 0 else 0
            found = _first_at_or_after(fd, start, limit, view.end, timestamp_ms)
        except FrameError as e:
            raise CorruptLogError(
                e.reason, path=log_path(directory, base), offset=e.offset
            ) from None
        finally:
            os.close(fd)
        if found is not None:
            return found
    return None


def _first_at_or_after(
    fd: int, pos: int, limit: int | None, stop: int, timestamp_ms: int
) -> int | None:
    want = READ_CHUNK_BYTES
    while True:
        size = want if limit is None else min(want, limit - pos)
        buf = os.pread(fd, size, pos) if size > 0 else b""
        consumed = 0
        for info in scan_frames(buf, 0, len(buf)):
            if info.offset >= stop:
                return None
            if info.timestamp_ms >= timestamp_ms:
                return info.offset
            consumed = info.end
        if consumed == 0:
            need = frame_length_at(buf, 0)
            if need is None or need <= len(buf) or len(buf) < size:
                return None
            want = need
        else:
            pos += consumed
            want = READ_CHUNK_BYTES
