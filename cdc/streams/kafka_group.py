"""A consumer-group member on Kafka: partitions assigned by the group, rebalances reported.

Members of one processor share its input partitions. With one input topic the assignment is
cooperative-sticky (a rebalance moves only the partitions that must move); with several it is
``range``, the assignor that gives same-numbered partitions of co-partitioned topics to the same
member, so one task sees every input of its partition. ``group.instance.id`` is the member's
name (static membership): a member restarted within the session timeout gets its partitions
back without a rebalance.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from cdc.streams import kafka_client as kc
from cdc.streams.kafka_reader import KafkaStreamReader
from cdc.streams.protocol import Rebalance, StreamRecord, TopicPartition

if TYPE_CHECKING:
    from cdc.streams.kafka_stream import KafkaEventStream


class KafkaGroupReader(KafkaStreamReader):
    """Read-committed reader over the partitions the consumer group assigns to ``member``."""

    def __init__(
        self,
        stream: KafkaEventStream,
        topics: Sequence[str],
        group: str,
        member: str,
        on_assigned: Callable[[list[TopicPartition]], Mapping[TopicPartition, int]],
        on_revoked: Rebalance,
        session_timeout_s: float,
    ) -> None:
        self.group = group
        self.at_end = set()
        self.consumer = kc.make_consumer(
            stream.bootstrap,
            group,
            {
                "group.instance.id": member,
                "partition.assignment.strategy": (
                    "cooperative-sticky" if len(topics) == 1 else "range"
                ),
                # the broker's minimum is group.min.session.timeout.ms (6 s by default)
                "session.timeout.ms": int(session_timeout_s * 1000),
                "heartbeat.interval.ms": max(100, int(session_timeout_s * 1000) // 5),
                **stream.client_settings(),
            },
        )
        self._assigned, self._revoked = on_assigned, on_revoked
        self._cooperative = len(topics) == 1
        self._metadata: object = None
        self._closing = False
        self._owned: set[TopicPartition] = set()
        self.consumer.subscribe(
            list(topics), on_assign=self._on_assign, on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )  # fmt: skip

    def _on_assign(self, consumer: kc.Consumer, partitions: list[kc.KafkaPartition]) -> None:
        arriving = [TopicPartition(p.topic, p.partition) for p in partitions]
        starts = self._assigned(arriving)
        placed = [kc.KafkaPartition(*tp, starts[tp]) for tp in arriving]
        if self._cooperative:
            consumer.incremental_assign(placed)
        else:
            consumer.assign(placed)
        self._owned.update(arriving)
        self._metadata = consumer.consumer_group_metadata()

    def _on_revoke(self, consumer: kc.Consumer, partitions: list[kc.KafkaPartition]) -> None:
        # Still ours until this returns: the processor commits them with the generation that
        # revokes them (the cooperative protocol has already moved to it).
        if not self._closing:  # librdkafka may block on the metadata of a closing consumer
            self._metadata = consumer.consumer_group_metadata()
        self._give_up(consumer, partitions)

    def _on_lost(self, consumer: kc.Consumer, partitions: list[kc.KafkaPartition]) -> None:
        # Already another member's: a commit must fail, so the metadata stays the old one.
        self._give_up(consumer, partitions)

    def _give_up(self, consumer: kc.Consumer, partitions: list[kc.KafkaPartition]) -> None:
        gone = [TopicPartition(p.topic, p.partition) for p in partitions]
        self._owned.difference_update(gone)
        self.at_end.difference_update(gone)
        self._revoked(gone)
        if self._cooperative:
            consumer.incremental_unassign(partitions)
        else:
            consumer.unassign()

    def poll(self, max_records: int = 10_000, timeout_s: float = 1.0) -> list[StreamRecord]:
        """Records of owned partitions only: a revoke served inside the poll (after the first
        record was fetched) leaves records of partitions that are no longer this member's."""
        records = super().poll(max_records, timeout_s)
        owned = self._owned
        if records and any((r.topic, r.partition) not in owned for r in records):
            return [r for r in records if (r.topic, r.partition) in owned]
        return records

    def rebalance_pending(self) -> bool:
        if self._closing or self._metadata is None:
            return False
        return bool(self.consumer.consumer_group_metadata() != self._metadata)

    def group_metadata(self) -> object:
        """The group generation the processor knows of: the one of the last rebalance it saw.

        librdkafka rejoins the group in the background (after a pause longer than the
        session, say) and serves the rebalance to the application only at the next ``poll``.
        A transaction committed in between with the consumer's current metadata would pass
        the generation check although its records were read while another member owned their
        partitions; with this snapshot it is fenced, as it must be."""
        return self._metadata

    def close(self) -> None:
        """Leave the group: the processor's ``on_revoked`` commits before partitions go."""
        self._closing = True
        self.consumer.close()

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(p.topic, p.partition) for p in self.consumer.assignment()]

    def seek(self, positions: Mapping[TopicPartition, int]) -> None:
        """Read the partitions again from ``positions`` (after a transaction was lost)."""
        for (topic, partition), offset in positions.items():
            self.consumer.seek(kc.KafkaPartition(topic, partition, offset))
