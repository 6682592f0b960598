"""Standby tasks: warm copies of tasks other members own, kept by tailing their changelog
partitions, so a failover restores only the tail (Kafka Streams' ``num.standby.replicas``).

Where standbys go follows from who owns which task, which the consumer group describes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from cdc.connector import ChangelogConnector
from cdc.errors import UserError
from cdc.processor.processor import ProcessorConfig
from cdc.processor.tasks import StateTask, open_task
from cdc.state import StateTable
from cdc.streams.protocol import EventStream

_log = logging.getLogger(__name__)

STANDBY_INTERVAL_S = 1.0
"""How often standby tasks apply the changelog their owners wrote meanwhile."""


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


class Standbys(dict[int, StateTask]):
    """A member's standby tasks by partition, kept where ``standby_tasks`` places them."""

    def __init__(
        self,
        stream: EventStream,
        config: ProcessorConfig,
        connector: ChangelogConnector,
        tables: Sequence[StateTable],
        member: str,
        replicas: int,
    ) -> None:
        super().__init__()
        self.stream, self.config, self.connector = stream, config, connector
        self.tables, self.member, self.replicas = tables, member, replicas
        self._owners = TaskOwners(stream, config, member)
        self._due = 0.0

    def due(self) -> bool:
        """Whether a ``refresh`` is due (every ``STANDBY_INTERVAL_S``)."""
        return self.replicas > 0 and time.monotonic() >= self._due

    def refresh(
        self, active: Collection[int], rebalances: int, before_restore: Callable[[], None]
    ) -> None:
        """Close the standbys no longer wanted, catch up the others, open new ones (calling
        ``before_restore`` first: a new standby's full restore may take long); ``active``: the
        member's own tasks, ``rebalances``: how many rebalances it has seen."""
        owners = self._owners.now(rebalances)
        wanted = wanted_standbys(owners, self.member, self.replicas, active, self)
        for partition in sorted(set(self) - wanted):
            self.pop(partition).close()  # its store stays: a later restore is a tail
        if wanted - set(active) - set(self):
            before_restore()
        for partition in sorted(wanted - set(active)):
            task = self.get(partition)
            if task is None:
                self[partition] = open_task(
                    self.stream, self.connector, self.tables, self.config.store_url,
                    self.member, partition,
                )  # fmt: skip
            else:
                task.catch_up(self.stream, self.connector)
        self._due = time.monotonic() + STANDBY_INTERVAL_S
