"""The transactional writer of a local log (a ``TransactionalWriter``).

A transaction holds the directory's ``writer.lock`` from ``begin`` to ``commit``/``abort``, so
transactions of all writers (threads or processes) are serialized. ``commit`` fsyncs the
transaction's frames, then appends one commit record (new partition ends and the consumer
group's positions) to the journal and fsyncs it: that append is the commit point.

Creating a writer takes the next epoch of its transactional id in the journal; an older writer
with that id then fails to begin or commit (FencedWriterError). An older writer in the same
process is fenced at once and its open transaction aborted; one in another process is fenced
when it next begins or commits (a new writer waits up to ``lock_timeout_s`` for its lock).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Mapping, Sequence

from cdc.errors import ChangeEventError
from cdc.streams.local.appender import PartitionAppender, recover_partition
from cdc.streams.local.compaction import compact_rolled
from cdc.streams.local.errors import FencedWriterError, TopicConfigError
from cdc.streams.local.journal import Journal, PartitionState, commit_record
from cdc.streams.local.locks import FileLock
from cdc.streams.local.segments import fsync_all
from cdc.streams.local.settings import WRITER_LOCK, LocalLogSettings, partition_dir
from cdc.streams.partitioner import partition_for
from cdc.streams.protocol import StreamReader, TopicPartition

_LIVE: dict[tuple[str, str], weakref.ref[LocalTransactionalWriter]] = {}
_LIVE_GUARD = threading.Lock()


class LocalTransactionalWriter:
    """Writes records to many partitions and commits them with consumer positions, atomically.

    One thread at a time may use a writer.
    """

    def __init__(
        self, root: str, journal: Journal, settings: LocalLogSettings, transactional_id: str
    ) -> None:
        self.transactional_id = transactional_id
        self._root = root
        self._journal = journal
        self._settings = settings
        self._lock = FileLock(os.path.join(root, WRITER_LOCK))
        self._mutex = threading.Lock()
        self._appenders: dict[TopicPartition, PartitionAppender] = {}
        self._touched: dict[tuple[str, int], PartitionAppender] = {}
        self._in_txn = False
        self._fenced = False
        self._closed = False
        self._round_robin = 0
        self._key = (os.path.realpath(root), transactional_id)
        with _LIVE_GUARD:
            previous = _LIVE.get(self._key)
            _LIVE[self._key] = weakref.ref(self)
        older = previous() if previous is not None else None
        if older is not None:
            older._fence()
        with journal.locked(settings.lock_timeout_s) as state:
            self._epoch = state.epochs.get(transactional_id, 0) + 1
            journal.append({"t": "init", "id": transactional_id, "epoch": self._epoch})

    def begin(self) -> None:
        """Start a transaction (waits for another writer's open transaction to end)."""
        with self._mutex:
            self._check_usable()
            if self._in_txn:
                raise RuntimeError("a transaction is already in progress")
            self._lock.acquire(self._settings.lock_timeout_s)
            try:
                self._journal.refresh()
                state = self._journal.state
                if state.epochs.get(self.transactional_id, 0) != self._epoch:
                    self._fenced = True
                    self._check_usable()
                if not self._lock.undisturbed:
                    # Someone else held the lock since our last transaction and may have died
                    # mid-transaction: forget cached files and truncate every partition.
                    for appender in self._appenders.values():
                        appender.close()
                    self._appenders.clear()
                    for topic, meta in state.topics.items():
                        for p in range(meta.partitions):
                            tp = TopicPartition(topic, p)
                            recover_partition(self._dir(tp), state.partition(tp))
                for tp, appender in list(self._appenders.items()):
                    if not appender.is_current(state.partition(tp)):
                        appender.close()
                        del self._appenders[tp]
            except BaseException:
                self._lock.release()
                raise
            self._in_txn = True

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes]] = (),
        timestamp_ms: int | None = None,
    ) -> None:
        """Queue a record; ``partition`` None: murmur2 of the key (round-robin without key)."""
        with self._mutex:
            if not self._in_txn:
                self._check_usable()
                raise RuntimeError("send outside a transaction: call begin() first")
            meta = self._journal.state.topics.get(topic)
            if meta is None:
                self._journal.refresh()
                meta = self._journal.state.topics.get(topic)
                if meta is None:
                    raise TopicConfigError(f"unknown topic {topic!r}: call ensure_topic first")
            if partition is None:
                if key is not None:
                    partition = partition_for(key, meta.partitions)
                else:
                    self._round_robin += 1
                    partition = self._round_robin % meta.partitions
            elif not 0 <= partition < meta.partitions:
                raise TopicConfigError(
                    f"topic {topic!r} has {meta.partitions} partitions, not partition {partition}"
                )
            if key is None and meta.compacted:
                raise ChangeEventError(
                    "a record of a compacted topic needs a key",
                    field="key",
                    topic=topic,
                    partition=partition,
                )
            appender = self._touched.get((topic, partition)) or self._touch(topic, partition)
            appender.append(
                key,
                value,
                time.time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms,
                headers,
            )

    def _touch(self, topic: str, partition: int) -> PartitionAppender:
        tp = TopicPartition(topic, partition)
        appender = self._appenders.get(tp)
        if appender is None:
            appender = PartitionAppender(
                self._dir(tp),
                tp.topic,
                tp.partition,
                self._journal.state.partition(tp),
                segment_bytes=self._settings.segment_bytes,
                index_interval_bytes=self._settings.index_interval_bytes,
                sync=self._settings.sync,
            )
            self._appenders[tp] = appender
        self._touched[tp] = appender
        return appender

    def commit(
        self,
        consumed: Mapping[TopicPartition, int] | None = None,
        reader: StreamReader | None = None,
    ) -> dict[TopicPartition, int]:
        """Commit the records and ``reader``'s group's ``consumed`` positions atomically.

        Returns the committed end (next offset) of every partition written in the transaction.
        """
        with self._mutex:
            if not self._in_txn:
                self._check_usable()
                raise RuntimeError("commit outside a transaction: call begin() first")
            groups: dict[str, dict[TopicPartition, int]] = {}
            if consumed:
                group = getattr(reader, "group", None)
                if not isinstance(group, str):
                    raise ValueError("committing consumed positions needs a reader with a group")
                owns = getattr(reader, "owns", None)
                lost = [tp for tp in consumed if owns is not None and not owns(tp)]
                if lost:
                    self._rollback()
                    raise FencedWriterError(
                        f"group {group} gave {lost[0].topic} partition {lost[0].partition} to "
                        "another member: this transaction may not commit its position"
                    )
                groups[group] = {TopicPartition(*tp): _position(p) for tp, p in consumed.items()}
            touched = list(self._touched.values())
            try:
                parts: dict[TopicPartition, PartitionState] = {}
                fds: list[int] = []
                dirs: list[str] = []
                for appender in touched:
                    parts[appender.tp], appender_fds, appender_dirs = appender.prepare()
                    fds += appender_fds
                    dirs += appender_dirs
                fsync_all(fds, dirs)
                if parts or groups:
                    self._append_commit(parts, groups)
            except BaseException:
                self._rollback()
                raise
            for appender in touched:
                appender.committed_as(parts[appender.tp])
            compact_rolled(self._touched.values(), self._journal.state, self._settings)
            self._touched.clear()
            self._in_txn = False
            self._lock.release()
            return {tp: committed.end for tp, committed in parts.items()}

    def _append_commit(
        self,
        parts: dict[TopicPartition, PartitionState],
        groups: dict[str, dict[TopicPartition, int]],
    ) -> None:
        with self._journal.locked(self._settings.lock_timeout_s) as state:
            if state.epochs.get(self.transactional_id, 0) != self._epoch:
                self._fenced = True
                self._check_usable()
            self._journal.append(commit_record(self.transactional_id, self._epoch, parts, groups))

    def abort(self) -> None:
        """Discard the open transaction; its records are never visible."""
        with self._mutex:
            if not self._in_txn:
                self._check_usable()
                raise RuntimeError("abort outside a transaction")
            self._rollback()

    def _rollback(self) -> None:
        try:
            for appender in self._touched.values():
                try:
                    appender.rollback()
                except Exception:  # the next writer's recovery truncates what is left
                    appender.close()
                    self._appenders.pop(appender.tp, None)
        finally:
            self._touched.clear()
            self._in_txn = False
            self._lock.release()

    def _fence(self) -> None:
        with self._mutex:
            self._fenced = True
            if self._in_txn:
                self._rollback()

    def _check_usable(self) -> None:
        if self._closed:
            raise RuntimeError(f"writer {self.transactional_id!r} is closed")
        if self._fenced:
            raise FencedWriterError(
                f"writer {self.transactional_id!r} (epoch {self._epoch}) was fenced by a newer "
                "writer with the same transactional id"
            )

    def _dir(self, tp: TopicPartition) -> str:
        return partition_dir(self._root, tp.topic, tp.partition)

    def close(self) -> None:
        """Abort an open transaction and release the files."""
        with self._mutex:
            if self._in_txn:
                self._rollback()
            for appender in self._appenders.values():
                appender.close()
            self._appenders.clear()
            self._closed = True
        with _LIVE_GUARD:
            ref = _LIVE.get(self._key)
            if ref is not None and ref() is self:
                del _LIVE[self._key]


def _position(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"a consumed position must be an offset >= 0, got {value!r}")
    return value
