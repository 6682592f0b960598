"""A partitioned processor: one member of a consumer group, running a task per input partition.

Several members of one processor (processes, or machines) share its input partitions the way
Kafka Streams instances do: the group assigns partitions, and each member keeps a task per
partition it owns, with the task's state in a store of its own and its writes on the same
partition of every changelog topic. Each member commits its own transactions (transactional id
``<processor>.processor.<member>``) with the group's metadata, so a member that lost its
partitions (a zombie) is fenced by the group generation and cannot commit over the new owner.

A rebalance is handled inside ``poll``: partitions leaving commit the open transaction first
and close their tasks; partitions arriving abort an open transaction (its input is read again: a
restore must not outlast the transaction's timeout), read their committed input positions
(librdkafka asks for stable ones under read-committed isolation), then restore their tasks from
the changelog (only the tail when the store is there) before any of their records is read.

A key's state must be written by one task: key the inputs by the state tables' keys (as Kafka
Streams requires before an aggregation); inputs must have equal partition counts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from cdc.connector.metadata import end_record
from cdc.processor.events import Decoder, json_decoder
from cdc.processor.processor import EventProcessor, Handler, ProcessorConfig
from cdc.processor.restore import Progress, RestoreReport
from cdc.processor.standbys import Standbys
from cdc.processor.tasks import RebalanceEvent, StateTask, input_partitions, open_task
from cdc.state import StateTable, StateTables
from cdc.streams.protocol import (
    EventStream,
    GroupReader,
    StreamRecord,
    TopicPartition,
    TransactionLostError,
)

_log = logging.getLogger(__name__)


class GroupProcessor(EventProcessor):
    """One member (``member``: a name stable across its restarts) of a partitioned processor;
    ``standby_replicas`` other members keep a standby of each task (``standbys``)."""

    def __init__(
        self,
        config: ProcessorConfig,
        stream: EventStream,
        tables: Sequence[StateTable],
        handler: Handler,
        *,
        member: str,
        standby_replicas: int = 0,
        decoder: Decoder = json_decoder,
        progress: Progress | None = None,
        on_rebalance: Callable[[RebalanceEvent], None] | None = None,
    ) -> None:
        partitions = input_partitions(config, stream)
        super().__init__(config, stream, tables, handler, decoder=decoder)
        self.member, self._progress = member, progress
        self.partitions = partitions
        self._txn_prefix = f"{config.processor_id}:{member}"
        self.tasks: dict[int, StateTask] = {}
        self._owned: set[TopicPartition] = set()
        self._touched: set[int] = set()
        self._lost = False
        self._in_rebalance = False
        self._held: list[StreamRecord] = []
        self._group_reader: GroupReader | None = None
        self.lost_transactions = 0
        self._rebalances_seen = 0
        self.rebalances: list[RebalanceEvent] = []
        """Every change of this member's tasks, in order."""
        self.on_rebalance = on_rebalance
        self.standbys = Standbys(stream, config, self.connector, self._declared, member,
                                 standby_replicas)  # fmt: skip

    def start(self, progress: Progress | None = None) -> RestoreReport:
        """Create the topics and join the group; tasks are restored as partitions arrive."""
        cfg, stream = self.config, self.stream
        for topic in self.connector.topics.values():
            stream.ensure_topic(topic, self.partitions, compacted=True)
        stream.ensure_topic(self.connector.transaction_topic, 1)
        stream.ensure_topic(cfg.dead_letter_topic, 1)
        # Abort this member's transaction left open by its previous run before reading anything.
        # Members share these topics: a commit waits only for its own partitions to be readable.
        self._writer = stream.writer(
            f"{cfg.processor_id}.processor.{self.member}",
            transaction_timeout_s=cfg.transaction_timeout_s,
            shared_topics=(self.connector.transaction_topic, cfg.dead_letter_topic),
        )
        self._progress = progress or self._progress
        self._reader = self._group_reader = stream.group_reader(
            cfg.inputs, cfg.processor_id, self.member, self._on_assigned, self._on_revoked,
            session_timeout_s=cfg.session_timeout_s,
        )  # fmt: skip
        if self.standbys.replicas > 0:
            self._refresh_standbys()
        return RestoreReport()

    def _next_seq(self) -> int:
        # Members number their commits independently: microseconds keep them in time order
        # across members (for ``txn:`` cuts), strictly increasing within one.
        return max(self._seq + 1, time.time_ns() // 1000)

    def _on_assigned(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        self._in_rebalance = True
        try:
            return self._assign(partitions)
        finally:
            self._in_rebalance = False

    def _on_revoked(self, partitions: list[TopicPartition]) -> None:
        self._in_rebalance = True
        try:
            self._revoke(partitions)
        finally:
            self._in_rebalance = False

    def _assign(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        started = time.monotonic()
        new = sorted({tp.partition for tp in partitions} - set(self.tasks))
        if new and self._txn is not None:
            self._give_up_transaction()
        committed = {
            topic: self.stream.committed_positions(self.config.processor_id, topic)
            for topic in {tp.topic for tp in partitions}
        }
        for partition in new:
            task = self.standbys.pop(partition, None)
            if task is not None:
                task.catch_up(self.stream, self.connector, self._progress)
            else:
                task = open_task(
                    self.stream, self.connector, self._declared, self.config.store_url,
                    self.member, partition, self._progress,
                )  # fmt: skip
            self.tasks[partition] = task
        starts = {}
        for tp in partitions:
            start = committed[tp.topic].get(tp.partition)
            starts[tp] = self.stream.bounds(*tp).log_start if start is None else start
        self._owned.update(partitions)
        self._consumed.update(starts)
        restored = {p: self.tasks[p].restores[-1].events for p in new}
        self._rebalanced(RebalanceEvent("assigned", new, time.monotonic() - started, restored))
        return starts

    def _give_up_transaction(self) -> None:
        """Abort the open transaction before restoring assigned tasks, its input read again
        after the poll (as a lost one's): a restore may outlast the transaction's timeout, when
        the broker aborts it and fences the producer; a commit here is refused for the
        rebalance's generation."""
        assert self._writer is not None
        self._writer.abort()
        _log.info(
            "member %s: open transaction aborted for a restore, input read again", self.member
        )
        self.lost_transactions += 1
        self._lost = True
        self._txn, self._pending_events = None, 0

    def _revoke(self, partitions: list[TopicPartition]) -> None:
        started = time.monotonic()
        if self._txn is not None:
            self._commit()
        self._owned.difference_update(partitions)
        for tp in partitions:
            self._consumed.pop(tp, None)
        kept = {tp.partition for tp in self._owned}
        gone = sorted(set(self.tasks) - kept)
        for partition in gone:
            task = self.tasks.pop(partition)
            if self._lost:
                task.tables.discard()
            if self.standbys.replicas > 0:
                self.standbys[partition] = task
            else:
                task.close()
        self._rebalanced(RebalanceEvent("revoked", gone, time.monotonic() - started))

    def _rebalanced(self, event: RebalanceEvent) -> None:
        self.rebalances.append(event)
        if self.on_rebalance is not None:
            self.on_rebalance(event)

    def _reassigned(self) -> bool:
        seen, self._rebalances_seen = self._rebalances_seen, len(self.rebalances)
        return seen != self._rebalances_seen

    def _poll(self, want: int) -> list[StreamRecord]:
        assert self._reader is not None
        if self._held:
            records, self._held = self._held[:want], self._held[want:]
        else:
            records = self._reader.poll(want, self.config.commit_interval_s)
        if not self._lost and self.standbys.due():
            self._refresh_standbys()
        if self._lost:
            self._rewind()
            return []
        return records

    def _rewind(self) -> None:
        """After a lost transaction: forget its state writes and read its input again. A
        transaction begun since (records of an earlier poll processed) is given up with it."""
        if self._txn is not None:
            assert self._writer is not None
            self._writer.abort()
        for task in self.tasks.values():
            task.tables.discard()
        self._touched.clear()
        self._next_offsets.clear()
        self._held.clear()
        self._txn, self._pending_events, self._lost = None, 0, False
        assert self._group_reader is not None
        owned = {tp: o for tp, o in self._consumed.items() if tp in self._owned}
        self._group_reader.seek(owned)

    def _refresh_standbys(self) -> None:
        # A transaction open through a new standby's restore might outlast its timeout.
        commit = self._commit if self._txn is not None else lambda: None
        self.standbys.refresh(self.tasks, len(self.rebalances), before_restore=commit)

    def _process(self, record: StreamRecord) -> int:
        partition = record.partition
        self._touched.add(partition)
        return self._handle(record, self.tasks[partition].tables, partition)

    def _serve_rebalance(self) -> None:
        """Serve a rebalance the group went through in the background before committing: a
        commit with the generation this member last saw would be fenced and read again. A
        revoke served here commits the transaction itself (with the new generation); records
        the serving polls return are held for the next ``_poll``."""
        reader = self._group_reader
        deadline = time.monotonic() + self.config.session_timeout_s
        while reader is not None and reader.rebalance_pending() and time.monotonic() < deadline:
            self._held += reader.poll(self.config.commit_max_events, 0.05)
            if self._txn is None or self._lost:
                return

    def _commit(self) -> None:
        if not self._in_rebalance:
            self._serve_rebalance()
            if self._txn is None or self._lost:
                return
        assert self._writer is not None and self._txn is not None
        self._send(end_record(self.connector, self._txn))
        consumed = dict(self._consumed)
        consumed.update({TopicPartition(*tp): o for tp, o in self._next_offsets.items()})
        try:
            written = self._writer.commit(consumed, self._reader)
        except TransactionLostError as exc:
            # Fenced (another member owns a partition now) or failed: nothing of it is
            # visible; _poll rewinds the input and forgets the state writes.
            _log.warning("member %s: transaction lost, input read again: %s", self.member, exc)
            self.lost_transactions += 1
            self._lost = True
            self._txn, self._pending_events = None, 0
            return
        self._consumed = consumed
        self._next_offsets.clear()
        for tp, position in written.items():
            task = self.tasks.get(tp.partition)
            if task is not None and tp.topic in self.connector.table_of_topic:
                task.checkpoint[tp] = position
        for partition in self._touched:
            task = self.tasks[partition]
            task.tables.apply(dict(task.checkpoint))
        self._touched.clear()
        self._txn, self._pending_events = None, 0

    def consumed_position(self, tp: TopicPartition) -> int:
        """The next input offset of an owned partition (processed, maybe not yet committed)."""
        pending = self._next_offsets.get((tp.topic, tp.partition))
        return pending if pending is not None else self._consumed.get(tp, 0)

    def _snapshot_sources(self) -> list[tuple[int | None, StateTables]]:
        self._touched.update(self.tasks)
        return [(partition, task.tables) for partition, task in self.tasks.items()]

    def close(self) -> None:
        """Leave the group (the open transaction of revoked tasks commits) and close stores."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._writer is not None:
            self._writer.close()
        for task in [*self.tasks.values(), *self.standbys.values()]:
            task.close()
        self.tasks.clear()
        self.standbys.clear()
