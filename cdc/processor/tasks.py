"""Tasks of a partitioned processor: the state of one input partition in a store of its own.

Task ``p`` processes partition ``p`` of every (co-partitioned) input topic, and its state writes
go to partition ``p`` of each changelog topic, so a task is restored from its own changelog
partitions only. An *active* task is processed; a *standby* keeps a warm copy of a task another
member owns by tailing its changelog partitions, so a failover restores only the tail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from cdc.connector import ChangelogConnector
from cdc.errors import UsageError
from cdc.processor.processor import ProcessorConfig
from cdc.processor.restore import Progress, RestoreReport, restore_store
from cdc.state import (
    CorruptStateStoreError,
    StateStore,
    StateTable,
    StateTables,
    destroy_state_store,
    open_state_store,
)
from cdc.streams.protocol import EventStream, TopicPartition


def task_store_url(store_url: str, member: str, partition: int) -> str:
    """The store of ``member``'s task ``partition`` under the processor's store URL:
    ``rocksdb:///dir`` -> ``rocksdb:///dir/<member>/task-<partition>`` (members on one machine
    may share the URL); ``memory://`` stays an (own) in-memory store."""
    parts = urlsplit(store_url)
    if parts.scheme == "memory":
        return store_url
    path = parts.path.rstrip("/") + f"/{member}/task-{partition}"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment))


def input_partitions(config: ProcessorConfig, stream: EventStream) -> int:
    """The partition count of a partitioned processor's inputs (its number of tasks), checked:
    the inputs must be co-partitioned, and a changelog partition count given must match."""
    counts = {topic: stream.partition_count(topic) for topic in config.inputs}
    if len(set(counts.values())) != 1:
        listed = ", ".join(f"{t} has {n}" for t, n in counts.items())
        raise UsageError(
            f"the inputs of partitioned processor {config.processor_id} are not "
            f"co-partitioned ({listed} partitions): give them equal partition counts"
        )
    partitions = next(iter(counts.values()))
    if config.changelog_partitions not in (0, partitions):
        raise UsageError(
            f"a partitioned processor's changelog has one partition per input partition "
            f"({partitions}), not {config.changelog_partitions}"
        )
    return partitions


@dataclass(frozen=True)
class RebalanceEvent:
    """A change of a member's tasks: ``assigned`` (restored first) or ``revoked``."""

    kind: str
    tasks: list[int]
    seconds: float
    restored_events: dict[int, int] = field(default_factory=dict)
    """Per assigned task, the changelog records its restore applied."""


@dataclass
class StateTask:
    """One task's store, its state tables and the changelog positions the store reflects."""

    partition: int
    store: StateStore
    tables: StateTables
    checkpoint: dict[TopicPartition, int]
    restores: list[RestoreReport] = field(default_factory=list)

    @property
    def restored_events(self) -> int:
        return sum(r.events for r in self.restores)

    def catch_up(
        self, stream: EventStream, connector: ChangelogConnector, progress: Progress | None = None
    ) -> RestoreReport:
        """Apply the task's changelog from its checkpoint to the end (the store must have no
        pending writes: a standby, or a task before it is processed)."""
        report = restore_store(
            stream, self.store, connector, progress=progress, partitions=(self.partition,)
        )
        self.checkpoint = dict(report.positions)
        self.restores.append(report)
        return report

    def close(self) -> None:
        self.store.close()


def open_task(
    stream: EventStream,
    connector: ChangelogConnector,
    tables: Sequence[StateTable],
    store_url: str,
    member: str,
    partition: int,
    progress: Progress | None = None,
) -> StateTask:
    """Open task ``partition``'s store (rebuilt when unusable) and restore it to the end of
    its changelog partitions: only the tail after its checkpoint when the store is intact."""
    url = task_store_url(store_url, member, partition)
    try:
        store, reason = open_state_store(url), ""
    except CorruptStateStoreError as exc:
        destroy_state_store(url)
        store, reason = open_state_store(url), f"store unusable: {exc}"
    report = restore_store(
        stream, store, connector, rebuilt=bool(reason), reason=reason, progress=progress,
        partitions=(partition,),
    )  # fmt: skip
    task = StateTask(partition, store, StateTables(store, tables), dict(report.positions))
    task.restores.append(report)
    return task
