"""Contract checks of writing: topics, transactions, fencing, consumer positions."""

from __future__ import annotations

import contextlib
import threading

import pytest

from cdc.streams.protocol import TopicPartition
from tests.cdc.streams.contract_support import (
    NOW_MS,
    StreamOpener,
    new_topic,
    opened,
    poll_until,
    values,
)


def check_topics_are_created_idempotently(open_stream: StreamOpener) -> None:
    """ensure_topic is idempotent, persisted, and rejects a different partition count."""
    topic, compacted = new_topic(), new_topic("compacted")
    with opened(open_stream) as stream:
        stream.ensure_topic(topic, 3)
        stream.ensure_topic(topic, 3)
        stream.ensure_topic(compacted, 1, compacted=True)
        assert {topic, compacted} <= set(stream.topics())
        assert stream.partition_count(topic) == 3
        assert stream.is_compacted(compacted) and not stream.is_compacted(topic)
        with pytest.raises(Exception, match=topic):
            stream.ensure_topic(topic, 4)
    with opened(open_stream) as other:
        assert other.partition_count(topic) == 3
        assert other.is_compacted(compacted)
        assert other.bounds(topic, 2).end == other.bounds(topic, 2).log_start


def check_records_round_trip(open_stream: StreamOpener) -> None:
    """Keys, values, tombstones, headers and timestamps come back as sent, in offset order."""
    topic = new_topic()
    sent = [
        (b"k1", b"v1", (), NOW_MS + 1_000),
        (b"k2", None, (), NOW_MS + 2_000),
        (None, b"no key", (("h1", b"a"), ("h2", b"")), NOW_MS + 3_000),
        (b"", b"", (("h", b"\x00\xff"),), NOW_MS + 4_000),
        (b"k3", b"x" * 100_000, (), NOW_MS + 5_000),
    ]
    with opened(open_stream) as stream:
        stream.ensure_topic(topic, 2)
        writer = stream.writer(new_topic("txn"))
        writer.begin()
        for key, value, headers, ts in sent:
            writer.send(topic, key, value, partition=1, headers=headers, timestamp_ms=ts)
        ends = writer.commit()
        writer.close()
        got = list(stream.read(topic, 1, 0))
        assert [(r.key, r.value, r.headers, r.timestamp_ms) for r in got] == sent
        assert all(r.topic == topic and r.partition == 1 for r in got)
        offsets = [r.offset for r in got]
        assert offsets == sorted(set(offsets))
        assert offsets[-1] + 1 <= ends[TopicPartition(topic, 1)] <= stream.bounds(topic, 1).end
        assert TopicPartition(topic, 0) not in ends
        assert list(stream.read(topic, 0, 0)) == []


def check_uncommitted_records_are_invisible(open_stream: StreamOpener) -> None:
    """Records of an open transaction are invisible to read, bounds and readers elsewhere."""
    topic = new_topic()
    with opened(open_stream) as stream, opened(open_stream) as other:
        stream.ensure_topic(topic, 1)
        tp = TopicPartition(topic, 0)
        writer = stream.writer(new_topic("txn"))
        writer.begin()
        for i in range(100):
            writer.send(topic, b"k", str(i).encode(), partition=0)
        reader = other.reader({tp: 0})
        assert reader.poll(timeout_s=0.3) == []
        assert list(other.read(topic, 0, 0)) == []
        assert other.bounds(topic, 0).end == other.bounds(topic, 0).log_start
        writer.commit()
        assert len(poll_until(reader, 100)) == 100
        reader.close()
        writer.close()


def check_aborted_transactions_are_never_visible(open_stream: StreamOpener) -> None:
    """An aborted transaction leaves no records; the transactions around it are intact."""
    topic = new_topic()
    with opened(open_stream) as stream:
        stream.ensure_topic(topic, 2)
        writer = stream.writer(new_topic("txn"))
        for label, commit in ((b"a", True), (b"b", False), (b"c", True)):
            writer.begin()
            for p in (0, 1):
                for i in range(3):
                    writer.send(topic, b"k", label + str(i).encode(), partition=p)
            if commit:
                ends = writer.commit()
            else:
                writer.abort()
        writer.close()
        for p in (0, 1):
            assert values(stream.read(topic, p, 0)) == [b"a0", b"a1", b"a2", b"c0", b"c1", b"c2"]
            assert stream.bounds(topic, p).end >= ends[TopicPartition(topic, p)]
        reader = stream.reader({TopicPartition(topic, 0): 0, TopicPartition(topic, 1): 0})
        expected = [b"a0", b"a1", b"a2", b"c0", b"c1", b"c2"] * 2
        assert sorted(r.value or b"" for r in poll_until(reader, 12)) == sorted(expected)
        assert reader.poll(timeout_s=0.2) == []
        reader.close()


def check_commit_returns_the_next_positions(open_stream: StreamOpener) -> None:
    """commit() returns, per written partition, a position past its last record."""
    topic = new_topic()
    with opened(open_stream) as stream:
        stream.ensure_topic(topic, 3)
        writer = stream.writer(new_topic("txn"))
        previous: dict[TopicPartition, int] = {}
        for round_ in range(3):
            writer.begin()
            for p in (0, 2):
                writer.send(topic, b"k", f"{round_}-{p}".encode(), partition=p)
            ends = writer.commit()
            assert set(ends) == {TopicPartition(topic, 0), TopicPartition(topic, 2)}
            for tp, end in ends.items():
                records = list(stream.read(topic, tp.partition, previous.get(tp, 0)))
                assert values(records) == [f"{round_}-{tp.partition}".encode()]
                assert records[-1].offset < end
                assert list(stream.read(topic, tp.partition, end)) == []
            previous = ends
        writer.close()


def check_consumer_positions_commit_with_the_transaction(open_stream: StreamOpener) -> None:
    """commit(consumed, reader) stores the reader group's positions, atomically and durably."""
    source, sink, group = new_topic("src"), new_topic("sink"), new_topic("group")
    with opened(open_stream) as stream:
        stream.ensure_topic(source, 2)
        stream.ensure_topic(sink, 1)
        writer = stream.writer(new_topic("txn"))
        writer.begin()
        for i in range(10):
            writer.send(source, str(i).encode(), b"in", partition=i % 2)
        writer.commit()
        assert stream.committed_positions(group, source) == {}
        positions = {TopicPartition(source, 0): 0, TopicPartition(source, 1): 0}
        reader = stream.reader(positions, group=group)
        consumed = {}
        for record in poll_until(reader, 10):
            consumed[TopicPartition(record.topic, record.partition)] = record.offset + 1
        writer.begin()
        writer.send(sink, b"k", b"out", partition=0)
        writer.commit(consumed, reader)
        expected = {tp.partition: pos for tp, pos in consumed.items()}
        assert stream.committed_positions(group, source) == expected
        assert stream.committed_positions(group, sink) == {}
        writer.begin()
        writer.send(sink, b"k", b"aborted", partition=0)
        writer.abort()
        writer.begin()
        writer.commit({TopicPartition(source, 0): 1}, reader)
        assert stream.committed_positions(group, source) == {**expected, 0: 1}
        reader.close()
        writer.close()
    with opened(open_stream) as other:
        assert other.committed_positions(group, source) == {**expected, 0: 1}


def check_new_writer_fences_the_old_one(open_stream: StreamOpener) -> None:
    """A second writer with the same transactional id fences the first; its records vanish."""
    topic, txn_id = new_topic(), new_topic("txn")
    with opened(open_stream) as stream, opened(open_stream) as other:
        stream.ensure_topic(topic, 1)
        old = stream.writer(txn_id)
        old.begin()
        old.send(topic, b"k", b"zombie", partition=0)
        new = other.writer(txn_id)
        with pytest.raises(Exception):  # noqa: B017 - the protocol names no fencing error type
            old.commit()
        with pytest.raises(Exception):  # noqa: B017
            old.begin()
            old.send(topic, b"k", b"zombie 2", partition=0)
            old.commit()
        new.begin()
        new.send(topic, b"k", b"new", partition=0)
        new.commit()
        new.close()
        with contextlib.suppress(Exception):
            old.close()
        assert values(stream.read(topic, 0, 0)) == [b"new"]


def check_compacted_topics_need_keys(open_stream: StreamOpener) -> None:
    """A keyless record is rejected by a compacted topic; keyed records and tombstones are not."""
    topic = new_topic()
    with opened(open_stream) as stream:
        stream.ensure_topic(topic, 1, compacted=True)
        writer = stream.writer(new_topic("txn"))
        writer.begin()
        with pytest.raises(Exception):  # noqa: B017 - raised by send (local) or commit (Kafka)
            writer.send(topic, None, b"v", partition=0)
            writer.commit()
        with contextlib.suppress(Exception):
            writer.abort()
        writer.begin()
        writer.send(topic, b"k", b"v", partition=0)
        writer.send(topic, b"k", None, partition=0)
        writer.commit()
        writer.close()
        assert values(stream.read(topic, 0, 0)) == [b"v", None]


def check_transactions_stay_whole_under_concurrent_reads(open_stream: StreamOpener) -> None:
    """Readers of another handle only ever see whole transactions of each partition."""
    topic, per_txn, txns = new_topic(), 25, 30
    with opened(open_stream) as stream, opened(open_stream) as other:
        stream.ensure_topic(topic, 2)

        def produce() -> None:
            writer = stream.writer(new_topic("txn"))
            for t in range(txns):
                writer.begin()
                for i in range(per_txn):
                    for p in (0, 1):
                        writer.send(topic, b"k", f"{t}:{i}".encode(), partition=p)
                writer.commit()
            writer.close()

        def check_whole(partition: int) -> int:
            got = values(other.read(topic, partition, 0))
            whole = len(got) // per_txn
            assert got == [f"{t}:{i}".encode() for t in range(whole) for i in range(per_txn)]
            return len(got)

        thread = threading.Thread(target=produce)
        thread.start()
        while thread.is_alive():
            check_whole(0)
            check_whole(1)
        thread.join()
        assert check_whole(0) == check_whole(1) == txns * per_txn
