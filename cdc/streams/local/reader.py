"""A reader of committed records of many partitions of a local log (a ``StreamReader``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from cdc.runtime.record_heap import cycle_collector_paused
from cdc.streams.local.cursor import PartitionCursor
from cdc.streams.local.journal import Journal
from cdc.streams.protocol import StreamRecord, TopicPartition


class LocalStreamReader:
    """Polls assigned partitions round-robin; waits for other processes' commits when idle.

    ``group`` is the consumer group whose positions a writer commits with this reader's input.
    """

    def __init__(
        self,
        journal: Journal,
        partition_dir: Callable[[TopicPartition], str],
        dense: Mapping[TopicPartition, bool],
        positions: Mapping[TopicPartition, int],
        group: str | None,
        poll_interval_s: float,
    ) -> None:
        self.group = group
        self._journal = journal
        self._poll_interval_s = poll_interval_s
        self._cursors = {
            TopicPartition(*tp): PartitionCursor(
                partition_dir(TopicPartition(*tp)), *tp, pos, dense=dense[TopicPartition(*tp)]
            )
            for tp, pos in positions.items()
        }
        self._order = list(self._cursors)
        self._next = 0
        self._closed = False

    def poll(self, max_records: int = 10_000, timeout_s: float = 1.0) -> list[StreamRecord]:
        """Up to ``max_records`` committed records; [] if none were committed within timeout_s."""
        if self._closed:
            raise RuntimeError("poll on a closed reader")
        deadline = time.monotonic() + timeout_s
        delay = 0.001
        out: list[StreamRecord] = []
        while True:
            self._journal.refresh()
            state = self._journal.state
            count = len(self._order)
            with cycle_collector_paused():  # a poll's records are thousands of new tuples
                for i in range(count):
                    tp = self._order[(self._next + i) % count]
                    self._cursors[tp].read(state.partition(tp), max_records - len(out), out)
                    if len(out) >= max_records:
                        break
            if count:
                self._next = (self._next + 1) % count
            remaining = deadline - time.monotonic()
            if out or remaining <= 0:
                return out
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, self._poll_interval_s)

    def position(self, topic: str, partition: int) -> int:
        """The next offset to read of an assigned partition."""
        return self._cursors[TopicPartition(topic, partition)].position

    def positions(self) -> dict[TopicPartition, int]:
        """The next offset to read of every assigned partition."""
        return {tp: cursor.position for tp, cursor in self._cursors.items()}

    def close(self) -> None:
        """Release the open segment files."""
        for cursor in self._cursors.values():
            cursor.close()
        self._closed = True
