"""Log compaction: keep only the latest record per key in closed segments, offsets unchanged.

The caller holds the log directory's transaction lock. Kept frames are copied byte for byte
(their offsets and CRCs do not change), consecutive segments are merged while they fit one
segment, and each merged group is written to ``<first>.log.cleaned`` and fsynced, then renamed
over ``<first>.log``; the group's other segments are deleted afterwards, in ascending order.
Every file that holds an offset holds the same record there, so a crash between any two steps
leaves a valid log (some records merely stay uncompacted until the next run), and concurrent
readers see a valid mix of old and new files.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass

from cdc.streams.local.appender import PartitionAppender
from cdc.streams.local.errors import CorruptLogError
from cdc.streams.local.frames import FrameError, FrameInfo, scan_frames
from cdc.streams.local.journal import JournalState, PartitionState
from cdc.streams.local.segments import (
    CLEANED_SUFFIX,
    INDEX_ENTRY,
    fsync_directory,
    index_path,
    list_segments,
    log_path,
)
from cdc.streams.local.settings import LocalLogSettings

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one partition's compaction did."""

    segments_before: int
    segments_after: int
    records_before: int
    records_after: int


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """Segment size to merge up to, index spacing, tombstone retention, durability."""

    segment_bytes: int
    index_interval_bytes: int
    delete_retention_ms: int
    sync: bool


def compact_partition(
    directory: str, view: PartitionState, settings: CompactionSettings, now_ms: int
) -> CompactionResult:
    """Compact the closed segments of the partition in ``directory`` committed up to ``view``."""
    for name in os.listdir(directory) if os.path.isdir(directory) else []:
        if name.endswith(CLEANED_SUFFIX):
            os.unlink(os.path.join(directory, name))
    bases = [b for b in list_segments(directory) if b <= view.segment_base]
    closed = bases[:-1]
    if not closed:
        return CompactionResult(len(bases), len(bases), 0, 0)
    # A segment owns the offsets up to the next segment's base: after a crash mid-swap a
    # merged segment may still overlap old segments holding the same records.
    ranges = {b: (b, nxt) for b, nxt in zip(bases, [*bases[1:], view.end], strict=True)}
    latest: dict[bytes, int] = {}
    for base in bases:
        limit = view.segment_bytes if base == view.segment_base else None
        for info in _frames(directory, base, limit, ranges[base])[1]:
            if info.key is not None:
                latest[info.key] = info.offset

    def keep(info: FrameInfo) -> bool:
        if info.key is None:
            return True
        if latest[info.key] != info.offset:
            return False
        return not (info.tombstone and now_ms - info.timestamp_ms > settings.delete_retention_ms)

    groups: list[tuple[list[int], list[tuple[bytes, FrameInfo]], bool]] = []
    records_before = records_after = 0
    for base in closed:
        data, frames, stored = _frames(directory, base, None, ranges[base])
        kept = [(data[f.start : f.end], f) for f in frames if keep(f)]
        records_before += len(frames)
        records_after += len(kept)
        size = sum(len(raw) for raw, _ in kept)
        if groups:
            members, group_frames, _ = groups[-1]
            if sum(len(raw) for raw, _ in group_frames) + size <= settings.segment_bytes:
                members.append(base)
                group_frames.extend(kept)
                groups[-1] = (members, group_frames, True)
                continue
        groups.append(([base], kept, len(kept) != stored))
    for members, group_frames, changed in groups:
        if changed:
            _swap_in(directory, members, group_frames, settings)
    segments_after = len(groups) + len(bases) - len(closed)
    return CompactionResult(len(bases), segments_after, records_before, records_after)


def _frames(
    directory: str, base: int, limit: int | None, owned: tuple[int, int]
) -> tuple[bytes, list[FrameInfo], int]:
    """A segment's bytes, its frames with offsets in ``owned``, and how many frames it stores."""
    path = log_path(directory, base)
    with open(path, "rb") as f:
        data = f.read() if limit is None else f.read(limit)
    try:
        frames = list(scan_frames(data, 0, len(data)))
    except FrameError as e:
        raise CorruptLogError(e.reason, path=path, offset=e.offset, position=e.position) from None
    end = frames[-1].end if frames else 0
    if end != len(data):
        raise CorruptLogError("partial frame", path=path, position=end)
    lo, hi = owned
    return data, [info for info in frames if lo <= info.offset < hi], len(frames)


def _swap_in(
    directory: str,
    members: list[int],
    frames: list[tuple[bytes, FrameInfo]],
    settings: CompactionSettings,
) -> None:
    first = members[0]
    index: list[bytes] = []
    position = since_index = 0
    max_ts = -1
    for raw, info in frames:
        if since_index >= settings.index_interval_bytes:
            index.append(INDEX_ENTRY.pack(info.offset, position, max_ts))
            since_index = 0
        position += len(raw)
        since_index += len(raw)
        max_ts = max(max_ts, info.timestamp_ms)
    log_tmp = log_path(directory, first) + CLEANED_SUFFIX
    idx_tmp = index_path(directory, first) + CLEANED_SUFFIX
    contents = ((log_tmp, b"".join(raw for raw, _ in frames)), (idx_tmp, b"".join(index)))
    for path, content in contents:
        with open(path, "wb") as f:
            f.write(content)
            f.flush()
            if settings.sync:
                os.fsync(f.fileno())
    os.replace(idx_tmp, index_path(directory, first))
    os.replace(log_tmp, log_path(directory, first))
    if settings.sync:
        fsync_directory(directory)
    for base in members[1:]:
        os.unlink(log_path(directory, base))
        os.unlink(index_path(directory, base))
    if settings.sync and len(members) > 1:
        fsync_directory(directory)


def compact_rolled(
    touched: Iterable[PartitionAppender], state: JournalState, settings: LocalLogSettings
) -> None:
    """After a commit: compact each compacted partition the transaction wrote to that has rolled
    ``settings.auto_compact_bytes`` since its last compaction (a failure is logged and retried
    after a later commit: the commit itself already happened)."""
    threshold = settings.auto_compact_bytes
    if threshold is None:
        return
    compaction = CompactionSettings(
        settings.segment_bytes,
        settings.index_interval_bytes,
        settings.delete_retention_ms,
        settings.sync,
    )
    for appender in touched:
        if state.topics[appender.topic].compacted and appender.rolled_bytes >= threshold:
            appender.rolled_bytes = 0
            try:
                now_ms = time.time_ns() // 1_000_000
                compact_partition(appender.directory, appender.committed, compaction, now_ms)
            except Exception:
                _log.exception("compaction of %s failed", appender.tp)
