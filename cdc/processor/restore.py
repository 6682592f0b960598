"""Restore: bring a processor's local store to the end of its changelog before it resumes.

If the store is intact, only the changelog tail after its checkpoint is replayed; if it is gone,
corrupt or inconsistent with the changelog (a checkpoint outside the log), it is wiped and
rebuilt from the changelog's start.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cdc.connector import ChangelogConnector
from cdc.state import CapturedChange, StateStore, apply_changelog_batch
from cdc.streams.protocol import EventStream, TopicPartition

RESTORE_BATCH = 10_000


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
) -> RestoreReport:
    """Replay the changelog from the store's checkpoint to the end, in atomic batches."""
    started = time.monotonic()
    report = RestoreReport(rebuilt=rebuilt, reason=reason)
    checkpoint = store.checkpoint()
    ranges: list[tuple[TopicPartition, int, int]] = []
    for topic in connector.topics.values():
        for partition in range(stream.partition_count(topic)):
            tp = TopicPartition(topic, partition)
            bounds = stream.bounds(topic, partition)
            start = checkpoint.get(tp, bounds.log_start)
            if not bounds.log_start <= start <= bounds.end and not report.rebuilt:
                store.wipe()
                why = f"checkpoint {start} of {topic}[{partition}] is outside the changelog"
                return restore_store(
                    stream, store, connector, rebuilt=True,
                    reason=f"{why} [{bounds.log_start}, {bounds.end}]", progress=progress,
                )  # fmt: skip
            ranges.append((tp, start, bounds.end))
    total = sum(end - start for _, start, end in ranges)
    tables = list(connector.tables.values())
    done = dict(checkpoint)
    for tp, start, end in ranges:
        batch: list[CapturedChange] = []
        last = start - 1
        for record in stream.read(tp.topic, tp.partition, start, end):
            change = connector.decode(record)
            if change is not None:
                batch.append(change)
            report.events += 1
            last = record.offset
            if len(batch) >= RESTORE_BATCH:
                done[tp] = last + 1
                apply_changelog_batch(store, tables, batch, done)
                batch = []
                if progress:
                    progress(report.events, total)
        done[tp] = end
        apply_changelog_batch(store, tables, batch, done)
        if progress:
            progress(report.events, total)
    report.positions = done
    report.seconds = time.monotonic() - started
    return report
