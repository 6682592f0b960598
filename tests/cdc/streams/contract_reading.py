"""Contract checks of reading: ranges, readers, timestamps, partitioning, durability."""

from __future__ import annotations

import threading
import time

from cdc.streams.partitioner import partition_for
from cdc.streams.protocol import StreamRecord, TopicPartition
from tests.cdc.streams.contract_support import (
    NOW_MS,
    StreamOpener,
    new_topic,
    opened,
    poll_until,
    values,
)


def check_read_respects_start_and_stop(open_stream: StreamOpener) -> None:
    """read() returns exactly start <= offset < stop, clamped to the committed end."""
    topic = new_topic()
    with opened(open_stream) as stream:
        stream.ensure_topic(topic, 1)
        writer = stream.writer(new_topic("txn"))
        writer.begin()
        for i in range(20):
            writer.send(topic, b"k", str(i).encode(), partition=0)
        writer.commit()
        offsets = [r.offset for r in stream.read(topic, 0, 0)]
        lo, hi = offsets[5], offsets[12]
        assert [r.offset for r in stream.read(topic, 0, lo, hi)] == offsets[5:12]
        assert [r.offset for r in stream.read(topic, 0, lo)] == offsets[5:]
        assert [r.offset for r in stream.read(topic, 0, lo, 10**12)] == offsets[5:]
        assert list(stream.read(topic, 0, stream.bounds(topic, 0).end)) == []


def check_keys_are_partitioned_like_kafka(open_stream: StreamOpener) -> None:
    """send() without a partition puts a keyed record where Kafka's partitioner would."""
    topic = new_topic()
    keys = [f"customer-{i}".encode() for i in range(40)]
    with opened(open_stream) as stream:
        stream.ensure_topic(topic, 5)
        writer = stream.writer(new_topic("txn"))
        writer.begin()
        for key in keys:
            writer.send(topic, key, key)
        writer.commit()
        writer.close()
        for p in range(5):
            expected = [k for k in keys if partition_for(k, 5) == p]
            assert values(stream.read(topic, p, 0)) == expected


def check_reader_polls_many_partitions_and_topics(open_stream: StreamOpener) -> None:
    """A reader returns every committed record of its partitions from its positions, in order."""
    first, second = new_topic("a"), new_topic("b")
    with opened(open_stream) as stream:
        stream.ensure_topic(first, 3)
        stream.ensure_topic(second, 2)
        writer = stream.writer(new_topic("txn"))
        writer.begin()
        for i in range(300):
            writer.send(first, None, f"a{i}".encode(), partition=i % 3)
            writer.send(second, None, f"b{i}".encode(), partition=i % 2)
        writer.commit()
        writer.close()
        skip = [r.offset for r in stream.read(second, 1, 0)][50]
        positions = {TopicPartition(first, p): 0 for p in range(3)}
        positions.update({TopicPartition(second, 0): 0, TopicPartition(second, 1): skip})
        reader = stream.reader(positions)
        batch: list[StreamRecord] = []
        deadline = time.monotonic() + 30
        while not batch and time.monotonic() < deadline:
            batch = reader.poll(max_records=7, timeout_s=1)
        assert 0 < len(batch) <= 7
        records = batch + poll_until(reader, 600 - 50 - len(batch))
        assert reader.poll(timeout_s=0.2) == []
        reader.close()
        by_partition: dict[TopicPartition, list[StreamRecord]] = {}
        for r in records:
            by_partition.setdefault(TopicPartition(r.topic, r.partition), []).append(r)
        for tp, got in by_partition.items():
            expected = list(stream.read(tp.topic, tp.partition, positions[tp]))
            assert got == expected


def check_idle_reader_waits_for_commits_of_another_handle(open_stream: StreamOpener) -> None:
    """poll() at the end waits up to its timeout, and returns early when another handle
    commits. (The poll that first finds the end may return early: it reports the end.)"""
    topic = new_topic()
    with opened(open_stream) as stream, opened(open_stream) as other:
        stream.ensure_topic(topic, 1)
        reader = stream.reader({TopicPartition(topic, 0): 0})
        assert reader.poll(timeout_s=2) == []  # reaches the end
        started = time.monotonic()
        assert reader.poll(timeout_s=0.3) == []
        assert time.monotonic() - started >= 0.25

        def produce() -> None:
            time.sleep(0.3)
            writer = other.writer(new_topic("txn"))
            writer.begin()
            writer.send(topic, b"k", b"late", partition=0)
            writer.commit()
            writer.close()

        thread = threading.Thread(target=produce)
        thread.start()
        started = time.monotonic()
        got: list[StreamRecord] = []
        while not got and time.monotonic() - started < 20:
            got = reader.poll(timeout_s=20)
        thread.join()
        assert values(got) == [b"late"]
        assert time.monotonic() - started < 15
        reader.close()


def check_offset_for_time(open_stream: StreamOpener) -> None:
    """offset_for_time finds the first offset with a timestamp >= the given one, else the end."""
    topic = new_topic()
    with opened(open_stream) as stream:
        stream.ensure_topic(topic, 1)
        writer = stream.writer(new_topic("txn"))
        writer.begin()
        for ts in (NOW_MS + 1_000, NOW_MS + 2_000, NOW_MS + 2_000, NOW_MS + 3_000):
            writer.send(topic, b"k", str(ts).encode(), partition=0, timestamp_ms=ts)
        writer.commit()
        writer.close()
        offsets = [r.offset for r in stream.read(topic, 0, 0)]
        assert stream.offset_for_time(topic, 0, 0) == offsets[0]
        assert stream.offset_for_time(topic, 0, NOW_MS + 1_500) == offsets[1]
        assert stream.offset_for_time(topic, 0, NOW_MS + 2_000) == offsets[1]
        assert stream.offset_for_time(topic, 0, NOW_MS + 3_000) == offsets[3]
        assert stream.offset_for_time(topic, 0, NOW_MS + 3_001) == stream.bounds(topic, 0).end


def check_data_survives_reopening(open_stream: StreamOpener) -> None:
    """Committed records, topics and positions are durable across handles.

    The topic is not compacted: Kafka may compact superseded records of a compacted topic at
    once (its segments roll by record time)."""
    topic, group = new_topic(), new_topic("group")
    with opened(open_stream) as stream:
        stream.ensure_topic(topic, 2)
        writer = stream.writer(new_topic("txn"))
        reader = stream.reader({}, group=group)
        writer.begin()
        writer.send(topic, b"k", b"v", partition=1, timestamp_ms=NOW_MS + 42)
        writer.send(topic, b"k", None, partition=1, timestamp_ms=NOW_MS + 43)
        writer.commit({TopicPartition(topic, 0): 7}, reader)
        writer.close()
        before = list(stream.read(topic, 1, 0))
    with opened(open_stream) as reopened:
        assert reopened.partition_count(topic) == 2
        assert list(reopened.read(topic, 1, 0)) == before
        assert [r.value for r in before] == [b"v", None]
        assert reopened.committed_positions(group, topic) == {0: 7}
