"""Consumer groups on the local log: members of one processor share partitions through locks.

Under ``<log>/.groups/<group>/`` each live member holds a lock on ``members/<name>`` and, for
each task (partition number, the same for every co-partitioned input) it owns, a lock on
``tasks/<p>``. The kernel drops a dead process's locks (``kill -9`` included), so the others
see it gone at their next check and take its tasks over; no session timeout is involved.
The assignment is a pure function of the live members: task ``p`` goes to the ``p % n``-th
member by name. A member gives a task up (commit, then release) before another may take it,
so two members never process one partition; a writer's commit of consumed positions fails
for a partition whose lock its reader does not hold.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from cdc.errors import UsageError
from cdc.streams.local.errors import WriterLockTimeout
from cdc.streams.local.locks import FileLock, holder_label
from cdc.streams.protocol import Rebalance, StreamRecord, TopicPartition

if TYPE_CHECKING:
    from cdc.streams.local.log import LocalLog

CHECK_INTERVAL_S = 0.25
"""How often a member looks at who else is alive."""


def _try_lock(lock: FileLock) -> bool:
    try:
        lock.acquire(0)
    except WriterLockTimeout:
        return False
    return True


def task_owners(log_root: str, group: str, partitions: int) -> dict[int, str]:
    """The member holding each task lock of ``group`` now (tasks being handed over absent)."""
    tasks = os.path.join(log_root, ".groups", group, "tasks")
    owners = {p: holder_label(f"{tasks}/{p}") for p in range(partitions)}
    return {p: name for p, name in owners.items() if name}


class LocalGroupReader:
    """A member of a consumer group on a local log (a ``GroupReader``)."""

    def __init__(
        self,
        log: LocalLog,
        topics: Sequence[str],
        group: str,
        member: str,
        on_assigned: Callable[[list[TopicPartition]], Mapping[TopicPartition, int]],
        on_revoked: Rebalance,
    ) -> None:
        self.group: str | None = group
        if not member or any(c.isspace() or c == "/" for c in member) or len(member) > 200:
            raise UsageError(f"member name {member!r}: one word, no '/', at most 200 characters")
        self.member, self._log, self._topics = member, log, list(topics)
        self._assigned, self._revoked = on_assigned, on_revoked
        self._partitions = log.partition_count(self._topics[0])
        base = os.path.join(log.root, ".groups", group)
        self._members_dir, self._tasks_dir = f"{base}/members", f"{base}/tasks"
        os.makedirs(self._members_dir, exist_ok=True)
        os.makedirs(self._tasks_dir, exist_ok=True)
        self._me = FileLock(f"{self._members_dir}/{member}")
        if not _try_lock(self._me):
            raise UsageError(f"member {member} of group {group} already runs on {log.url}")
        self._tasks: dict[int, FileLock] = {}
        self._inner = log.reader({}, group=group)
        self._checked = 0.0

    def _live_members(self) -> list[str]:
        live = []
        for name in sorted(os.listdir(self._members_dir)):
            if name == self.member:
                live.append(name)
                continue
            if holder_label(f"{self._members_dir}/{name}") is not None:  # else that member is gone
                live.append(name)
        return live

    def _rebalance(self) -> None:
        live = self._live_members()
        mine = {p for p in range(self._partitions) if live[p % len(live)] == self.member}
        leaving = sorted(set(self._tasks) - mine)
        if leaving:
            self._revoked(self._task_partitions(leaving))
            for p in leaving:
                self._tasks.pop(p).release()
        arriving = []
        for p in sorted(mine - set(self._tasks)):
            lock = FileLock(f"{self._tasks_dir}/{p}", label=self.member)
            if _try_lock(lock):  # else its previous owner has not given it up yet
                self._tasks[p] = lock
                arriving.append(p)
        positions = self._inner.positions()
        if arriving:
            positions.update(self._assigned(self._task_partitions(arriving)))
        if leaving or arriving:
            kept = {tp: o for tp, o in positions.items() if tp.partition in self._tasks}
            self._inner.close()
            self._inner = self._log.reader(kept, group=self.group)
        self._checked = time.monotonic()

    def _task_partitions(self, tasks: Sequence[int]) -> list[TopicPartition]:
        return [TopicPartition(t, p) for p in tasks for t in self._topics]

    def poll(self, max_records: int = 10_000, timeout_s: float = 1.0) -> list[StreamRecord]:
        if time.monotonic() - self._checked >= CHECK_INTERVAL_S:
            self._rebalance()
        return self._inner.poll(max_records, min(timeout_s, CHECK_INTERVAL_S))

    def position(self, topic: str, partition: int) -> int:
        return self._inner.position(topic, partition)

    def assignment(self) -> list[TopicPartition]:
        return self._task_partitions(sorted(self._tasks))

    def owns(self, tp: TopicPartition) -> bool:
        """Whether this member holds the lock of ``tp``'s task (checked at every commit)."""
        lock = self._tasks.get(tp.partition)
        return lock is not None and lock.held

    def seek(self, positions: Mapping[TopicPartition, int]) -> None:
        kept = {**self._inner.positions(), **positions}
        self._inner.close()
        self._inner = self._log.reader(kept, group=self.group)

    def rebalance_pending(self) -> bool:
        """Never: members change tasks only inside ``poll``."""
        return False

    def close(self) -> None:
        """Give every task up (the processor commits first) and leave the group."""
        if self._tasks:
            self._revoked(self._task_partitions(sorted(self._tasks)))
        for lock in self._tasks.values():
            lock.release()
        self._tasks.clear()
        self._inner.close()
        self._me.release()
