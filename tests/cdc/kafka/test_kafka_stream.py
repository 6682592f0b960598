"""The Kafka event stream on the real broker: transactions, read-committed, positions, fencing."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from cdc.streams.kafka_errors import KafkaTransactionError
from cdc.streams.kafka_stream import KafkaEventStream, KafkaStreamError
from cdc.streams.latest import HeldBudget
from cdc.streams.protocol import StreamRecord, TopicPartition

pytestmark = pytest.mark.integration


def test_committed_transaction_is_visible_and_aborted_is_not(
    stream: KafkaEventStream, unique_name: Callable[[str], str]
) -> None:
    topic = unique_name("txn")
    stream.ensure_topic(topic, 2, compacted=True)
    stream.ensure_topic(topic, 2, compacted=True)  # idempotent
    assert stream.is_compacted(topic)
    writer = stream.writer(unique_name("writer"))
    writer.begin()
    for i in range(10):
        writer.send(topic, f"k{i}".encode(), f"v{i}".encode())
    written = writer.commit()
    writer.begin()
    writer.send(topic, b"k0", b"aborted", partition=0)
    writer.abort()
    writer.begin()
    writer.send(topic, b"k0", b"last", partition=0)
    written_last = writer.commit()
    writer.close()

    records = [r for p in (0, 1) for r in stream.read(topic, p, 0)]
    values = sorted(r.value or b"" for r in records)
    assert values == sorted([f"v{i}".encode() for i in range(10)] + [b"last"])
    assert sum(written.values()) > 0
    # the returned checkpoint is the position after the last record written
    last = next(r for r in records if r.value == b"last")
    assert written_last[TopicPartition(topic, 0)] == last.offset + 1
    for p in (0, 1):
        assert stream.bounds(topic, p).end >= max(
            [r.offset + 1 for r in records if r.partition == p], default=0
        )


def test_consumed_positions_commit_with_the_transaction(
    stream: KafkaEventStream, unique_name: Callable[[str], str]
) -> None:
    source, sink, group = unique_name("in"), unique_name("out"), unique_name("group")
    stream.ensure_topic(source)
    stream.ensure_topic(sink)
    feeder = stream.writer(unique_name("feeder"))
    feeder.begin()
    for i in range(5):
        feeder.send(source, b"k", str(i).encode())
    feeder.commit()
    feeder.close()

    reader = stream.reader({TopicPartition(source, 0): 0}, group=group)
    got: list[StreamRecord] = []
    while len(got) < 5:
        got += reader.poll(100, 5.0)
    writer = stream.writer(unique_name("processor"))
    writer.begin()
    writer.send(sink, b"k", b"sum=10")
    writer.commit({TopicPartition(source, 0): got[-1].offset + 1}, reader)
    reader.close()
    writer.close()
    assert stream.committed_positions(group, source) == {0: got[-1].offset + 1}
    assert [r.value for r in stream.read(sink, 0, 0)] == [b"sum=10"]


def test_a_new_writer_fences_the_old_one(
    stream: KafkaEventStream, unique_name: Callable[[str], str]
) -> None:
    topic, txn_id = unique_name("fence"), unique_name("zombie")
    stream.ensure_topic(topic)
    old = stream.writer(txn_id)
    old.begin()
    old.send(topic, b"k", b"from-zombie")
    new = stream.writer(txn_id)  # init_transactions fences the old producer
    with pytest.raises(KafkaTransactionError):
        old.commit()
    new.begin()
    new.send(topic, b"k", b"from-new")
    new.commit()
    new.close()
    assert [r.value for r in stream.read(topic, 0, 0)] == [b"from-new"]


def test_an_abort_right_after_sending_leaves_the_writer_usable(
    stream: KafkaEventStream, unique_name: Callable[[str], str]
) -> None:
    """librdkafka's abort can fail fatally with INVALID_TXN_STATE when it follows sends closely
    (confluentinc/librdkafka#4849; on this broker within a few rounds of commit, send, abort):
    the writer takes over with a fresh producer and goes on; nothing aborted becomes visible."""
    topic = unique_name("abort-race")
    stream.ensure_topic(topic, 4)
    writer = stream.writer(unique_name("racer"))
    kept = []
    for i in range(60):
        writer.begin()
        for k in range(5):
            writer.send(topic, f"k{k}".encode(), f"{i}-{k}".encode())
        time.sleep((i % 7) * 0.001)
        if i % 2:
            writer.commit()
            kept += [f"{i}-{k}".encode() for k in range(5)]
        else:
            writer.abort()
    writer.close()
    values = sorted(r.value or b"" for p in range(4) for r in stream.read(topic, p, 0))
    assert values == sorted(kept)


def test_a_fenced_writer_cannot_abort_its_way_back(
    stream: KafkaEventStream, unique_name: Callable[[str], str]
) -> None:
    """An abort failing because the writer was fenced raises: taking over with a fresh producer
    would fence the writer that fenced it."""
    topic, txn_id = unique_name("fenced-abort"), unique_name("zombie")
    stream.ensure_topic(topic)
    old = stream.writer(txn_id)
    old.begin()
    old.send(topic, b"k", b"from-zombie")
    # The record in the broker's transaction first: a transaction that never reached the broker
    # (on a loaded machine, its record still queued) aborts locally, with nothing to fence.
    old._producer.flush(30)
    new = stream.writer(txn_id)
    new.begin()
    new.send(topic, b"k", b"from-new")
    with pytest.raises(KafkaTransactionError, match="could not be aborted"):
        old.abort()
    new.commit()
    new.close()
    assert [r.value for r in stream.read(topic, 0, 0)] == [b"from-new"]


def test_partition_count_mismatch_and_missing_topic_are_named(
    stream: KafkaEventStream, unique_name: Callable[[str], str]
) -> None:
    topic = unique_name("mismatch")
    stream.ensure_topic(topic, 2)
    assert not stream.is_compacted(topic)
    with pytest.raises(KafkaStreamError, match=f"topic {topic} exists with 2 partitions"):
        stream.ensure_topic(topic, 3)
    with pytest.raises(KafkaStreamError, match="does not exist"):
        stream.partition_count(unique_name("missing"))


def test_a_commit_does_not_wait_for_another_writers_transaction_on_a_shared_topic(
    stream: KafkaEventStream, unique_name: Callable[[str], str]
) -> None:
    """Members of a processor share its transaction topic: one member's commit returns while
    another's transaction there is still open (a killed member's stays open until the broker
    aborts it), and its own partitions are readable when it returns."""
    shared, own = unique_name("shared"), unique_name("own")
    stream.ensure_topic(shared, 1)
    stream.ensure_topic(own, 1)
    other = stream.writer(unique_name("other"), transaction_timeout_s=60)
    other.begin()
    other.send(shared, b"k", b"open", partition=0)
    mine = stream.writer(unique_name("mine"), shared_topics=(shared,))
    mine.begin()
    mine.send(shared, b"k", b"mine", partition=0)
    mine.send(own, b"k", b"mine", partition=0)
    written = mine.commit()  # waiting for the shared partition would take until 60 s, its abort
    assert [r.value for r in stream.read(own, 0, 0)] == [b"mine"]
    assert written[TopicPartition(shared, 0)] > stream.bounds(shared, 0).end  # held back
    other.commit()
    assert sorted(r.value or b"" for r in stream.read(shared, 0, 0)) == [b"mine", b"open"]
    mine.close()
    other.close()


def test_a_compacted_read_stops_at_its_stop_when_the_partition_is_fetched_whole(
    stream: KafkaEventStream, unique_name: Callable[[str], str]
) -> None:
    """Bug found by the replay kill -9 trials under load: a consumer that had fetched the whole
    partition before its first poll got the records past a read's stop and then the partition's
    end event in one batch; judged by that last message, the batch was not the one reaching the
    stop, and a bounded rebuild took in later changes. The sleep lets the fetch finish first."""
    topic = unique_name("whole")
    stream.ensure_topic(topic, 1)
    writer = stream.writer(unique_name("writer"))
    for txn in range(12):  # small transactions, as a processor's changelog has them
        writer.begin()
        for i in range(txn * 5, txn * 5 + 5):
            writer.send(topic, f"k{i}".encode(), f"v{i}".encode(), partition=0)
        writer.commit()
    writer.close()
    stop = 20
    expected = {r.key: r for r in stream.read(topic, 0, 0, stop) if r.key is not None}
    assert expected and max(r.offset for r in expected.values()) < stop
    reader = stream.reader({TopicPartition(topic, 0): 0})
    try:
        time.sleep(1.5)
        kept = reader.compact(topic, 0, stop, frozenset(), HeldBudget(topic, 0, None))
    finally:
        reader.close()
    assert kept.live == expected and not kept.gone and not kept.each
