"""``LocalLog``: the local-directory implementation of ``EventStream``.

Any number of handles, in any processes, may open one directory: readers never lock and only
see committed data; transactions (and compaction) are serialized by ``writer.lock``.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from types import TracebackType

from cdc.streams.latest import HeldBudget
from cdc.streams.local.compaction import CompactionResult, CompactionSettings, compact_partition
from cdc.streams.local.cursor import PartitionCursor, offset_for_time
from cdc.streams.local.errors import TopicConfigError
from cdc.streams.local.journal import Journal, PartitionState, TopicMeta
from cdc.streams.local.locks import FileLock
from cdc.streams.local.newest import newest_records
from cdc.streams.local.reader import LocalStreamReader
from cdc.streams.local.segments import SegmentFile, fsync_directory, list_segments, log_path
from cdc.streams.local.settings import (
    SCHEME,
    TOPICS_DIR,
    WRITER_LOCK,
    LocalLogSettings,
    parse_url,
    partition_dir,
    validate_topic,
)
from cdc.streams.local.writer import LocalTransactionalWriter
from cdc.streams.protocol import (
    CompactedRange,
    GroupReader,
    PartitionBounds,
    Rebalance,
    StreamRecord,
    TopicPartition,
)

_READ_BATCH = 10_000


class LocalLog:
    """A durable, partitioned, transactional log of records in a local directory."""

    def __init__(self, directory: str, settings: LocalLogSettings | None = None) -> None:
        self.root = os.path.abspath(directory)
        self.settings = settings or LocalLogSettings()
        self.url = SCHEME + self.root
        # Nothing is created until something is written: reading a mistyped path leaves no trace.
        self._journal = Journal(
            self.root, sync=self.settings.sync, rotate_bytes=self.settings.journal_rotate_bytes
        )
        self._owned: weakref.WeakSet[LocalStreamReader | LocalTransactionalWriter] = (
            weakref.WeakSet()
        )

    @classmethod
    def from_url(cls, url: str) -> LocalLog:
        """Open ``local:///abs/dir`` or ``local://relative/dir`` (settings as query parameters)."""
        directory, settings = parse_url(url)
        return cls(directory, settings)

    def ensure_topic(self, topic: str, partitions: int = 1, *, compacted: bool = False) -> None:
        """Create the topic if it does not exist; raise TopicConfigError on a mismatch."""
        validate_topic(topic)
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise TopicConfigError(f"topic {topic!r}: partitions must be >= 1, got {partitions!r}")
        self._journal.refresh()
        existing = self._journal.state.topics.get(topic)
        if existing is None:
            with self._journal.locked(self.settings.lock_timeout_s) as state:
                existing = state.topics.get(topic)
                if existing is None:
                    for p in range(partitions):
                        os.makedirs(partition_dir(self.root, topic, p), exist_ok=True)
                    if self.settings.sync:
                        fsync_directory(os.path.join(self.root, TOPICS_DIR, topic))
                        fsync_directory(os.path.join(self.root, TOPICS_DIR))
                    rec = {"t": "topic", "name": topic, "partitions": partitions}
                    self._journal.append({**rec, "compacted": compacted})
                    return
        if existing != TopicMeta(partitions, compacted):
            raise TopicConfigError(
                f"topic {topic!r} exists with {existing.partitions} partitions"
                f"{' (compacted)' if existing.compacted else ''}, requested {partitions}"
                f"{' (compacted)' if compacted else ''}"
            )

    def topics(self) -> list[str]:
        """Names of all topics, sorted."""
        self._journal.refresh()
        return sorted(self._journal.state.topics)

    def partition_count(self, topic: str) -> int:
        """The number of partitions of ``topic``."""
        return self._meta(topic).partitions

    def is_compacted(self, topic: str) -> bool:
        """Whether ``topic`` was created ``compacted=True``."""
        return self._meta(topic).compacted

    def _meta(self, topic: str) -> TopicMeta:
        meta = self._journal.state.topics.get(topic)
        if meta is None:
            self._journal.refresh()
            meta = self._journal.state.topics.get(topic)
            if meta is None:
                raise TopicConfigError(f"unknown topic {topic!r}")
        return meta

    def _view(self, topic: str, partition: int) -> tuple[str, PartitionState]:
        meta = self._meta(topic)
        if isinstance(partition, bool) or not 0 <= partition < meta.partitions:
            raise TopicConfigError(
                f"topic {topic!r} has {meta.partitions} partitions, not partition {partition!r}"
            )
        self._journal.refresh()
        state = self._journal.state.partition(TopicPartition(topic, partition))
        return partition_dir(self.root, topic, partition), state

    def bounds(self, topic: str, partition: int) -> PartitionBounds:
        """First stored offset (base of the first segment) and committed end."""
        directory, view = self._view(topic, partition)
        bases = list_segments(directory)
        start = bases[0] if bases else view.end
        return PartitionBounds(min(start, view.end), view.end)

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int:
        """First committed offset whose timestamp is >= ``timestamp_ms``; the end if none."""
        directory, view = self._view(topic, partition)
        found = offset_for_time(directory, view, timestamp_ms)
        return view.end if found is None else found

    def reader(
        self, positions: Mapping[TopicPartition, int], *, group: str | None = None
    ) -> LocalStreamReader:
        """A reader of committed records from ``positions`` (next offset per partition)."""
        for topic, partition in positions:
            self._view(topic, partition)
        reader = LocalStreamReader(
            self._journal,
            lambda tp: partition_dir(self.root, tp.topic, tp.partition),
            {TopicPartition(*tp): not self._meta(tp[0]).compacted for tp in positions},
            positions,
            group,
            self.settings.poll_interval_s,
        )
        self._owned.add(reader)
        return reader

    def read(
        self, topic: str, partition: int, start: int, stop: int | None = None
    ) -> Iterator[StreamRecord]:
        """Committed records with ``start <= offset < stop`` (``stop`` None: the current end)."""
        directory, view = self._view(topic, partition)
        end = view.end if stop is None else min(stop, view.end)
        cursor = PartitionCursor(
            directory, topic, partition, start, dense=not self._meta(topic).compacted
        )
        return self._read(cursor, replace(view, end=end))

    @staticmethod
    def _read(cursor: PartitionCursor, view: PartitionState) -> Iterator[StreamRecord]:
        try:
            while cursor.position < view.end:
                batch: list[StreamRecord] = []
                if not cursor.read(view, _READ_BATCH, batch):
                    return
                yield from batch
        finally:
            cursor.close()

    def read_compacted(
        self, topic: str, partition: int, start: int, stop: int | None = None, *,
        each_keys: frozenset[bytes] = frozenset(), max_held_bytes: int | None = None,
    ) -> CompactedRange:  # fmt: skip
        """``read``'s records compacted (``EventStream.read_compacted``)."""
        budget = HeldBudget(topic, partition, max_held_bytes)
        return newest_records(self, topic, partition, start, stop, each_keys, budget)

    def committed_positions(self, group: str, topic: str) -> dict[int, int]:
        """The positions ``group`` committed for ``topic``'s partitions (absent: none)."""
        self._journal.refresh()
        positions = self._journal.state.groups.get(group, {})
        return {tp.partition: pos for tp, pos in positions.items() if tp.topic == topic}

    def task_owners(self, group: str, topic: str) -> dict[int, str]:
        """The member of ``group`` that has each partition of ``topic`` now (by the task locks;
        a partition being handed over is absent)."""
        from cdc.streams.local.group import task_owners

        return task_owners(self.root, group, self.partition_count(topic))

    def group_reader(
        self,
        topics: Sequence[str],
        group: str,
        member: str,
        on_assigned: Callable[[list[TopicPartition]], Mapping[TopicPartition, int]],
        on_revoked: Rebalance,
        *,
        session_timeout_s: float = 10.0,
    ) -> GroupReader:
        """A member of ``group``; the local log sees a dead member at once (its locks go with
        the process), so ``session_timeout_s`` plays no part."""
        from cdc.streams.local.group import LocalGroupReader

        return LocalGroupReader(self, topics, group, member, on_assigned, on_revoked)

    def writer(
        self,
        transactional_id: str,
        *,
        transaction_timeout_s: float | None = None,
        shared_topics: Collection[str] = (),
        owned_topics: Collection[str] = (),
    ) -> LocalTransactionalWriter:
        """A transactional writer; a newer writer with the same id fences this one (a killed
        writer's transaction never blocks readers here, and a commit is visible when it
        returns: ``transaction_timeout_s``, ``shared_topics`` and ``owned_topics`` are
        unused)."""
        os.makedirs(self.root, exist_ok=True)
        writer = LocalTransactionalWriter(self.root, self._journal, self.settings, transactional_id)
        self._owned.add(writer)
        return writer

    def compact(self, topic: str, *, now_ms: int | None = None) -> dict[int, CompactionResult]:
        """Compact every partition of a compacted topic (waits for an open transaction)."""
        meta = self._meta(topic)
        if not meta.compacted:
            raise TopicConfigError(f"topic {topic!r} is not compacted")
        settings = CompactionSettings(
            self.settings.segment_bytes,
            self.settings.index_interval_bytes,
            self.settings.delete_retention_ms,
            self.settings.sync,
        )
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        lock = FileLock(os.path.join(self.root, WRITER_LOCK))
        lock.acquire(self.settings.lock_timeout_s)
        try:
            self._journal.refresh()
            state = self._journal.state
            return {
                p: compact_partition(
                    partition_dir(self.root, topic, p),
                    state.partition(TopicPartition(topic, p)),
                    settings,
                    now,
                )
                for p in range(meta.partitions)
            }
        finally:
            lock.release()

    def segment_files(
        self, topic: str, partition: int, start: int = 0, stop: int | None = None
    ) -> list[SegmentFile]:
        """The committed segments of a partition holding offsets in ``[start, stop)``, with
        their offset ranges: for bulk readers that decode files in parallel."""
        directory, view = self._view(topic, partition)
        stop = view.end if stop is None else min(stop, view.end)
        bases = [b for b in list_segments(directory) if b <= view.segment_base]
        ends = [*bases[1:], view.end][: len(bases)]  # (none: a partition never written)
        compacted = self._meta(topic).compacted
        return [
            SegmentFile(
                topic,
                partition,
                log_path(directory, base),
                base,
                end,
                view.segment_bytes if base == view.segment_base else None,
                compacted,
            )
            for base, end in zip(bases, ends, strict=True)
            if base < stop and end > start and base < end
        ]

    def close(self) -> None:
        """Close the writers and readers of this handle and the journal."""
        for owned in list(self._owned):
            owned.close()
        self._journal.close()

    def __enter__(self) -> LocalLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
