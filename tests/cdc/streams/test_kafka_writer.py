"""The Kafka writer's own behaviour beyond the stream contract, on the test broker."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cdc.streams.protocol import (
    EventStream,
    TopicPartition,
    TransactionalWriter,
    TransactionLostError,
)
from cdc.streams.registry import open_stream


def assert_only_commit(
    stream: EventStream, writer: TransactionalWriter, topic: str, value: bytes
) -> None:
    """Commit ``value`` with ``writer``; then it is all partition 0 of ``topic`` holds."""
    writer.begin()
    writer.send(topic, b"k", value, partition=0)
    writer.commit()
    writer.close()
    assert [r.value for r in stream.read(topic, 0, 0)] == [value]
    stream.close()


def test_a_transaction_left_open_by_a_failed_commit_is_aborted_by_the_next_begin(
    kafka_bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    """A commit that fails before asking Kafka to commit (here: consumed positions without the
    reader of their group) leaves the producer in its transaction; the next ``begin`` aborts it
    instead of failing, and none of its records is ever visible."""
    stream = open_stream(f"kafka://{kafka_bootstrap}")
    topic = unique_name("left-open")
    stream.ensure_topic(topic, 1)
    writer = stream.writer(unique_name("left-open-txn"))
    writer.begin()
    writer.send(topic, b"k", b"lost", partition=0)
    with pytest.raises(ValueError, match="reader"):
        writer.commit({TopicPartition(topic, 0): 1}, None)
    assert_only_commit(stream, writer, topic, b"kept")


def test_a_fenced_writer_whose_records_failed_does_not_fence_its_successor(
    kafka_bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    """Records sent after a newer writer with the same id fenced this one fail; the failed
    commit gives the transaction up without a new producer, which would fence the newer
    writer in turn (a zombie taking over)."""
    stream = open_stream(f"kafka://{kafka_bootstrap}")
    topic, txn_id = unique_name("fenced"), unique_name("fenced-txn")
    stream.ensure_topic(topic, 1)
    old = stream.writer(txn_id)
    old.begin()
    new = stream.writer(txn_id)
    old.send(topic, b"k", b"zombie", partition=0)
    with pytest.raises(TransactionLostError):
        old.commit()
    with pytest.raises(TransactionLostError):
        old.begin()
    assert_only_commit(stream, new, topic, b"new")
