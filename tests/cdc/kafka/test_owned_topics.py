"""Owned topics on the real broker: records without a delivery report each, positions from the
partitions' ends (as a reported record's), and a record the broker refuses still failing the
whole transaction."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from cdc.streams import kafka_client as kc
from cdc.streams.kafka_errors import KafkaTransactionError
from cdc.streams.kafka_stream import KafkaEventStream
from cdc.streams.protocol import TopicPartition

pytestmark = pytest.mark.integration


def test_positions_of_owned_topics_are_past_their_records_on_every_partition(
    stream: KafkaEventStream, unique_name: Callable[[str], str]
) -> None:
    """Records by key to an owned topic: the commit returns a position for each of its
    partitions, past the last record there (nothing is read from it), as a reported one would;
    a topic not owned keeps positions of the partitions written only."""
    owned, other = unique_name("owned"), unique_name("not-owned")
    stream.ensure_topic(owned, 3, compacted=True)
    stream.ensure_topic(other, 3)
    writer = stream.writer(unique_name("owner"), owned_topics=(owned,))
    for round_ in range(3):
        writer.begin()
        for i in range(20):
            writer.send(owned, f"k{i}".encode(), f"{round_}-{i}".encode())
        writer.send(other, b"k", str(round_).encode(), partition=1)
        writer.send(owned, b"k0", f"{round_}-placed".encode(), partition=2)
        ends = writer.commit()
        assert {tp for tp in ends if tp.topic == other} == {TopicPartition(other, 1)}
        for p in range(3):
            records = list(stream.read(owned, p, 0))
            assert records, f"partition {p} got no key of 20"
            end = ends[TopicPartition(owned, p)]
            assert end == records[-1].offset + 1  # written this round: as a report would say
            assert list(stream.read(owned, p, end)) == []
        assert sum(len(list(stream.read(owned, p, 0))) for p in range(3)) == 21 * (round_ + 1)
    writer.close()


def test_a_record_the_broker_refuses_fails_the_commit_of_an_owned_topic(
    stream: KafkaEventStream, unique_name: Callable[[str], str]
) -> None:
    """Without a report per record, a refused record (bigger than the topic allows) still
    fails the commit, named with its partition: nothing of the transaction is visible, and the
    writer goes on."""
    topic = unique_name("small-records")
    small = kc.NewTopic(topic, num_partitions=1, replication_factor=-1,
                        config={"max.message.bytes": "2000"})  # fmt: skip
    for future in stream._admin.create_topics([small]).values():
        future.result()
    stream.ensure_topic(topic)  # created is not yet in every metadata answer: wait until it is
    writer = stream.writer(unique_name("owner"), owned_topics=(topic,))
    writer.begin()
    writer.send(topic, b"fits", b"x")
    writer.send(topic, b"too-big", os.urandom(20_000))  # incompressible: refused by the broker
    with pytest.raises(KafkaTransactionError, match=f"{topic} \\[0\\].*too large"):
        writer.commit()  # librdkafka's error names the partition, as a report would have
    assert list(stream.read(topic, 0, 0)) == []
    writer.begin()
    writer.send(topic, b"fits", b"again")
    ends = writer.commit()
    (record,) = stream.read(topic, 0, 0)
    assert record.value == b"again" and ends[TopicPartition(topic, 0)] == record.offset + 1
    writer.close()
