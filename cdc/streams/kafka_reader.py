"""Reading a Kafka stream: a read-committed librdkafka consumer over assigned partitions."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from cdc.runtime.record_heap import cycle_collector_paused
from cdc.streams import kafka_client as kc
from cdc.streams.kafka_errors import KafkaStreamError, KafkaUnavailableError, unavailable
from cdc.streams.latest import HeldBudget
from cdc.streams.protocol import CompactedRange, StreamRecord, TopicPartition

if TYPE_CHECKING:
    from cdc.streams.kafka_stream import KafkaEventStream


def _headers(raw: object) -> tuple[tuple[str, bytes], ...]:
    if not raw:
        return ()
    items = raw.items() if isinstance(raw, dict) else raw
    out = []
    for name, value in items:  # type: ignore[attr-defined]
        data = value.encode() if isinstance(value, str) else (value or b"")
        out.append((str(name), bytes(data)))
    return tuple(out)


def _record(topic: str, partition: int, msg: kc.Message) -> StreamRecord:
    raw_headers = msg.headers()
    return StreamRecord(
        topic, partition, msg.offset() or 0, msg.key(), msg.value(), msg.timestamp()[1],
        _headers(raw_headers) if raw_headers else (),
    )  # fmt: skip


def _newest_offset(batch: list[kc.Message]) -> int:
    """The offset of the batch's last record (-1 if none). Not simply its last message: a
    consumer that fetched the whole partition before the first poll ends the batch with the
    partition's end event, after records past a read's stop (a bounded rebuild of a small
    topic then took in later changes)."""
    for msg in reversed(batch):
        if msg.error() is None:
            return msg.offset() or 0
    return -1


def _held_bytes(live: dict[bytes, kc.Message]) -> int:
    return sum(len(msg.value() or b"") for msg in live.values())


class KafkaStreamReader:
    """Read-committed reader over assigned partitions (a librdkafka consumer)."""

    def __init__(
        self, stream: KafkaEventStream, positions: Mapping[TopicPartition, int], group: str | None
    ) -> None:
        self.group = group
        self.consumer = kc.make_consumer(stream.bootstrap, group, stream.client_settings())
        self.consumer.assign([kc.KafkaPartition(t, p, o) for (t, p), o in positions.items()])
        self.at_end: set[TopicPartition] = set()

    def poll(self, max_records: int = 10_000, timeout_s: float = 1.0) -> list[StreamRecord]:
        """Up to ``max_records`` committed records, waiting up to ``timeout_s`` for the first;
        partitions found at their end are in ``at_end``. Returns early, possibly empty, when a
        partition reports its end (nothing more is committed there yet)."""
        deadline = time.monotonic() + timeout_s
        out: list[StreamRecord] = []
        while not out:
            # consume() would wait for all max_records: wait for one message, then take what
            # is already fetched.
            first = self.consumer.poll(max(0.0, deadline - time.monotonic()))
            if first is None:
                return out
            rest = self.consumer.consume(max_records - 1, 0) if max_records > 1 else []
            out, reached_end = self._records([first, *rest])
            if reached_end or time.monotonic() >= deadline:
                break  # a partition reached its end: no record may come before the timeout
        return out

    def _records(self, messages: list[kc.Message]) -> tuple[list[StreamRecord], bool]:
        """The records among ``messages``, and whether any partition reported its end."""
        # One loop, not a call per message: restores spend much of their time here.
        out: list[StreamRecord] = []
        ends: dict[TopicPartition, int] = {}  # partition at its end -> records before that
        append, new = out.append, tuple.__new__
        for msg in messages:
            err = msg.error()
            if err is not None:
                ends[self._end_of(msg, err)] = len(out)
                continue
            raw_headers = msg.headers()
            append(new(StreamRecord, (
                msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(),
                msg.timestamp()[1], _headers(raw_headers) if raw_headers else (),
            )))  # fmt: skip
        if self.at_end and out:
            self.at_end.difference_update({TopicPartition(r.topic, r.partition) for r in out})
        for tp, before in ends.items():
            if not any((r.topic, r.partition) == tp for r in out[before:]):
                self.at_end.add(tp)
        return out, bool(ends)

    def compact(
        self, topic: str, partition: int, end: int, each_keys: frozenset[bytes], budget: HeldBudget
    ) -> CompactedRange:
        """The reader's one partition read up to ``end`` and compacted, as
        ``EventStream.read_compacted`` says. The client's messages are held as they come, and
        records are built for the survivors only: a record per message (seven calls into the
        client and a tuple) was a quarter of a compaction's CPU."""
        live: dict[bytes, kc.Message] = {}
        gone: dict[bytes, kc.Message] = {}
        each: list[kc.Message] = []
        seen, consumer = 0, self.consumer
        with cycle_collector_paused():
            while True:
                first = consumer.poll(1.0)
                if first is None:
                    if self.position(topic, partition) >= end:
                        break
                    continue
                batch = [first, *consumer.consume(9_999, 0)]
                last = _newest_offset(batch) >= end - 1
                if last:  # one partition: offsets ascend, only this batch reaches the end
                    batch = [m for m in batch if m.error() is not None or (m.offset() or 0) < end]
                at_end = False
                for msg in batch:
                    err = msg.error()
                    if err is not None:
                        self._end_of(msg, err)
                        at_end = True
                        continue
                    key = msg.key()
                    if key is None or key in each_keys:
                        each.append(msg)
                        continue
                    if msg.value() is None:
                        gone[key] = msg
                    else:
                        live[key] = msg
                        if gone:
                            gone.pop(key, None)
                    seen += 1
                if seen >= budget.check_at:
                    budget.check(_held_bytes(live), seen, len(live))
                if last or (at_end and self.position(topic, partition) >= end):
                    break
            budget.check(_held_bytes(live), seen, len(live))
            return CompactedRange(
                {key: _record(topic, partition, msg) for key, msg in live.items()},
                {key: _record(topic, partition, msg) for key, msg in gone.items()},
                [_record(topic, partition, msg) for msg in each],
            )

    def _end_of(self, msg: kc.Message, err: kc.KafkaError) -> TopicPartition:
        """The partition a partition-EOF message is about; any other error is raised."""
        topic, partition = msg.topic() or "", msg.partition() or 0
        if err.code() != kc.KafkaError._PARTITION_EOF:
            where = f"{topic} partition {partition}" if topic else f"as consumer group {self.group}"
            if unavailable(err):
                raise KafkaUnavailableError(f"reading {where}: {err.str()}")
            raise KafkaStreamError(f"reading {where}: {err.str()}")
        return TopicPartition(topic, partition)

    def position(self, topic: str, partition: int) -> int:
        """The consumer's next offset for the partition (past skipped transaction markers)."""
        (tp,) = self.consumer.position([kc.KafkaPartition(topic, partition)])
        return int(tp.offset)

    def close(self) -> None:
        self.consumer.close()
