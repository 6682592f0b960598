"""Interactive queries and task status of one member of a partitioned processor.

A key's state lives in the task of the input partition its input records go to, so a query
by the input key (``input_key``, the bytes the input topic is keyed by) goes to one task;
without it, every task of this member is asked. Queries read committed state (what the
changelog holds), in the member's thread: between ``run`` calls or from its callbacks.
``owner`` says which member has a key's task now (from the consumer group on Kafka, the task
locks on the local log), from any process; asking that member is up to the caller (Kafka
Streams leaves the same step to its users).
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc.processor.group import GroupProcessor
from cdc.state import StateTable, StateTables
from cdc.state.changes import Row
from cdc.streams.partitioner import partition_for
from cdc.streams.protocol import TopicPartition


class TaskNotHere(KeyError):
    """The task holding the key is not active on this member."""


@dataclass(frozen=True)
class TaskStatus:
    """One task of a member: ``active`` or ``standby``, its restores, input positions and lag."""

    task: int
    role: str
    restored_events: int
    changelog_positions: dict[str, int]
    input_positions: dict[str, int]
    lag: int
    """Input records committed but not yet processed by this task (0 for a standby)."""


class MemberQueries:
    """Reads of ``member``'s state tables and the status of its tasks."""

    def __init__(self, member: GroupProcessor) -> None:
        self.member = member

    def owner_partition(self, input_key: bytes) -> int:
        """The task an input record keyed ``input_key`` goes to (Kafka's default partitioner)."""
        return partition_for(input_key, self.member.partitions)

    def owner(self, input_key: bytes) -> str | None:
        """The member that has ``input_key``'s task now, None while its task is being handed
        over. A snapshot: ask again if that member answers ``TaskNotHere``."""
        config = self.member.config
        owners = self.member.stream.task_owners(config.processor_id, config.inputs[0])
        return owners.get(self.owner_partition(input_key))

    def get(
        self, table: StateTable | str, key: object, *, input_key: bytes | None = None
    ) -> Row | None:
        """The committed row of ``key`` in ``table``: from ``input_key``'s task (``TaskNotHere``
        when another member owns it), else from whichever active task here holds it."""
        tasks = self.member.tasks
        if input_key is not None:
            partition = self.owner_partition(input_key)
            if partition not in tasks:
                found = self.owner(input_key)
                raise TaskNotHere(
                    f"task {partition} of {self.member.config.processor_id} is not on member "
                    f"{self.member.member} (it has tasks {sorted(tasks)}); "
                    + (f"member {found} has it" if found else "it is being handed over")
                )
            return self._committed(partition).view(table).get(key)
        for partition in tasks:
            row = self._committed(partition).view(table).get(key)
            if row is not None:
                return row
        return None

    def _committed(self, partition: int) -> StateTables:
        task = self.member.tasks[partition]
        return StateTables(task.store, task.tables.tables.values())

    def status(self) -> list[TaskStatus]:
        """Every task of the member, active ones first."""
        member, stream = self.member, self.member.stream
        out = []
        for role, tasks in (("active", member.tasks), ("standby", member.standbys)):
            for partition, task in sorted(tasks.items()):
                inputs = {
                    topic: member.consumed_position(TopicPartition(topic, partition))
                    for topic in member.config.inputs
                }
                lag = sum(
                    max(0, stream.bounds(topic, partition).end - position)
                    for topic, position in inputs.items()
                ) if role == "active" else 0  # fmt: skip
                out.append(TaskStatus(
                    partition, role, task.restored_events,
                    {tp.topic: position for tp, position in task.checkpoint.items()},
                    inputs if role == "active" else {}, lag,
                ))  # fmt: skip
        return out
