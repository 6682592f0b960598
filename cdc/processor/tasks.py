"""Tasks of a partitioned processor: the state of one input partition in a store of its own.

Task ``p`` processes partition ``p`` of every (co-partitioned) input topic, and its state writes
go to partition ``p`` of each changelog topic, so a task is restored from its own changelog
partitions only. An *active* task is processed; a *standby* keeps a warm copy of a task another
member owns by tailing its changelog partitions, so a failover restores only the tail.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from cdc.connector import ChangelogConnector
from cdc.errors import UserError
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

_log = logging.getLogger(__name__)


def task_store_url(store_url: str, member: str, partition: int) -> str:
    """The store of ``member``'s task ``partition`` under the processor's store URL:
    ``rocksdb:///dir`` -> ``rocksdb:///dir/<member>/task-<partition>`` (members on one machine
    may share the URL); ``memory://`` stays an (own) in-memory store."""
    parts = urlsplit(store_url)
    if parts.scheme == "memory":
        return store_url
    path = parts.path.rstrip("/") + f"/{member}/task-{partition}"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment))


def standby_tasks(
    owners: Mapping[int, str], member: str, replicas: int, kept: Iterable[int] = ()
) -> set[int]:
    """The tasks ``member`` keeps a standby of, Kafka Streams' way of spreading them: each task
    has one on each of the ``replicas`` members after its owner in name order (the members: the
    owners and ``member``; wrapping round), never on its owner. A task no member has now (being
    handed over) keeps the standbys it had (``kept``)."""
    ring = sorted({*owners.values(), member})
    out = {task for task in kept if task not in owners}
    for task, owner in owners.items():
        at = ring.index(owner)
        after = [ring[(at + k) % len(ring)] for k in range(1, len(ring))]
        if member in after[:replicas]:
            out.add(task)
    return out


OWNERS_INTERVAL_S = 15.0
"""How often a member with standbys asks the group who has which task while it sees no
rebalance (a backstop: every change of tasks is a rebalance all members take part in)."""
OWNERS_SETTLING_S = 10.0
"""For this long after a rebalance the member took part in, it asks at every standby refresh:
the others' new tasks show in the group's description only once they all have joined."""


class TaskOwners:
    """Who has which task of the processor, as the consumer group describes it, asked only
    around rebalances and every ``OWNERS_INTERVAL_S`` (describing a group is a broker request;
    members refresh their standbys every second)."""

    def __init__(self, stream: EventStream, config: ProcessorConfig, member: str) -> None:
        self.stream, self.config, self.member = stream, config, member
        self._owners: dict[int, str] = {}
        self._asked_at: float | None = None
        self._settling_until = 0.0
        self._rebalances = 0

    def now(self, rebalances: int) -> dict[int, str]:
        """The owners (empty while the group cannot be described); ``rebalances``: how many
        rebalances the member has seen, a change of which starts a settling period."""
        now = time.monotonic()
        if rebalances != self._rebalances:
            self._rebalances, self._settling_until = rebalances, now + OWNERS_SETTLING_S
        fresh = self._asked_at is not None and now - self._asked_at < OWNERS_INTERVAL_S
        if fresh and now >= self._settling_until:
            return dict(self._owners)
        try:
            self._owners = self.stream.task_owners(self.config.processor_id, self.config.inputs[0])
            self._asked_at = now
        except UserError as exc:  # advice only: try again at the next refresh
            _log.warning("member %s: who has which task is unknown: %s", self.member, exc)
            self._owners, self._asked_at = {}, None
        return dict(self._owners)


def wanted_standbys(
    owners: Mapping[int, str], member: str, replicas: int, active: Iterable[int],
    kept: Iterable[int],
) -> set[int]:  # fmt: skip
    """``standby_tasks`` of ``member`` (whose own tasks are ``active``) with the group's
    ``owners`` (empty: unknown, and the standbys ``kept`` stay as they are)."""
    return standby_tasks({**owners, **dict.fromkeys(active, member)}, member, replicas, kept)


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
