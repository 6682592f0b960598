"""Restore: bring a processor's local store to the end of its changelog before it resumes.

If the store is intact, only the changelog tail after its checkpoint is replayed; if it is gone,
corrupt or inconsistent with the changelog (a checkpoint outside the log), it is wiped and
rebuilt from the changelog's start.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

from cdc.connector import ChangelogConnector
from cdc.runtime.record_heap import cycle_collector_paused
from cdc.state import StateStore
from cdc.state.overlay import WriteLayer
from cdc.streams.protocol import EventStream, StreamRecord, TopicPartition

RESTORE_POLL = 10_000
"""Records asked of the reader per poll."""
WINDOW_BYTES = 64 << 20
"""Value bytes of the newest record per key kept before they are applied to the store."""
WINDOW_KEYS = 200_000
"""Keys kept before they are applied to the store."""


@dataclass
class RestoreReport:
    """What a restore did: ``rebuilt`` when the store was replaced from the changelog start."""

    events: int = 0
    seconds: float = 0.0
    rebuilt: bool = False
    reason: str = ""
    positions: dict[TopicPartition, int] = field(default_factory=dict)

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0


Progress = Callable[[int, int], None]
"""Called with (events restored so far, offset span to restore in total)."""


def restore_store(
    stream: EventStream,
    store: StateStore,
    connector: ChangelogConnector,
    *,
    rebuilt: bool = False,
    reason: str = "",
    progress: Progress | None = None,
    partitions: Collection[int] | None = None,
) -> RestoreReport:
    """Replay the changelog from the store's checkpoint to the end, in atomic batches;
    ``partitions``: only those partitions of each changelog topic (one task's share)."""
    started = time.monotonic()
    report = RestoreReport(rebuilt=rebuilt, reason=reason)
    checkpoint = store.checkpoint()
    ranges: dict[str, dict[int, tuple[int, int]]] = {}
    for topic in connector.topics.values():
        owned = range(stream.partition_count(topic)) if partitions is None else partitions
        for partition in owned:
            bounds = stream.bounds(topic, partition)
            start = checkpoint.get(TopicPartition(topic, partition), bounds.log_start)
            if not bounds.log_start <= start <= bounds.end and not report.rebuilt:
                store.wipe()
                why = f"checkpoint {start} of {topic}[{partition}] is outside the changelog"
                return restore_store(
                    stream, store, connector, rebuilt=True,
                    reason=f"{why} [{bounds.log_start}, {bounds.end}]", progress=progress,
                    partitions=partitions,
                )  # fmt: skip
            ranges.setdefault(topic, {})[partition] = (start, bounds.end)
    total = sum(end - start for spans in ranges.values() for start, end in spans.values())
    done = dict(checkpoint)
    with cycle_collector_paused():  # (record_heap's module doc)
        for topic, spans in ranges.items():
            _restore_topic(stream, store, connector, topic, spans, done, report, total, progress)
    report.positions = done
    report.seconds = time.monotonic() - started
    return report


def _restore_topic(
    stream: EventStream,
    store: StateStore,
    connector: ChangelogConnector,
    topic: str,
    spans: dict[int, tuple[int, int]],
    done: dict[TopicPartition, int],
    report: RestoreReport,
    total: int,
    progress: Progress | None,
) -> None:
    """Read every partition of one changelog topic with one reader, keeping the newest record
    per key (only it decides the key's state), and apply each window of them atomically with
    the positions read so far."""
    ends = {p: end for p, (start, end) in spans.items() if start < end}
    for partition, (_, end) in spans.items():
        done[TopicPartition(topic, partition)] = end  # applied with the first window
    if not ends:
        store.apply({}, done)
        return
    read = {p: spans[p][0] for p in ends}
    reader = stream.reader({TopicPartition(topic, p): start for p, start in read.items()})
    window: dict[object, StreamRecord] = {}
    size = 0
    try:
        while ends:
            batch = reader.poll(RESTORE_POLL, 1.0)
            for record in batch:
                p, offset = record.partition, record.offset
                if offset >= ends.get(p, -1):
                    continue  # written after the restore started (or a finished partition)
                read[p] = offset + 1
                key = record.key if record.key is not None else (p, offset)
                old = window.pop(key, None)  # the newest record per key goes last
                if old is not None and old.value is not None:
                    size -= len(old.value)
                window[key] = record
                if record.value is not None:
                    size += len(record.value)
                report.events += 1
            for p in list(ends):
                if read[p] >= ends[p] or (not batch and reader.position(topic, p) >= ends[p]):
                    read[p] = ends.pop(p)
            if not ends or size >= WINDOW_BYTES or len(window) >= WINDOW_KEYS:
                positions = {TopicPartition(topic, p): o for p, o in read.items()}
                _apply_window(store, connector, window.values(), {**done, **positions})
                window, size = {}, 0
                if progress:
                    progress(report.events, total)
    finally:
        reader.close()


def _apply_window(
    store: StateStore,
    connector: ChangelogConnector,
    records: Iterable[StreamRecord],
    checkpoint: dict[TopicPartition, int],
) -> None:
    layer = WriteLayer()
    for record in records:
        write = connector.restore_write(record)
        if write is not None:
            layer.put(*write)
    store.apply(layer.writes, checkpoint)
