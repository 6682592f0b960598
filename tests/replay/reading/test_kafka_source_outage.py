"""Spark's Kafka source failing because no broker answers: an ``UnavailableError`` with one line
naming the Kafka error (``--follow`` retries the round), not a Java trace."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from cdc.errors import UnavailableError
from cdc.streams.protocol import TopicPartition
from replay.cli.follow import follow_rounds
from replay.reading.kafka_source_errors import KafkaSourceUnavailableError, kafka_source_error
from replay.reading.plan import PartitionRange
from replay.reading.sources import _kafka_records

pytestmark = pytest.mark.integration

# Short client timeouts: the defaults wait a minute or more before giving up.
FAST_FAILURE = {
    "kafka.default.api.timeout.ms": "3000",
    "kafka.request.timeout.ms": "2000",
    "kafka.socket.connection.setup.timeout.ms": "500",
    "kafka.socket.connection.setup.timeout.max.ms": "1000",
    "fetchOffset.numRetries": "1",
    "fetchOffset.retryIntervalMs": "100",
    "kafkaConsumer.pollTimeoutMs": "3000",
}


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _failed_read(spark: Any) -> Exception:
    tp = TopicPartition("gone", 0)
    frame = _kafka_records(
        spark, f"127.0.0.1:{_unused_port()}", [PartitionRange(tp, 0, 10, 0, 10)], FAST_FAILURE
    )
    with pytest.raises(Exception) as caught:  # what Spark raises is the subject
        frame.collect()
    assert isinstance(caught.value, Exception)
    return caught.value


def test_a_spark_kafka_read_without_a_broker_is_unavailable_in_one_line(spark: Any) -> None:
    failure = _failed_read(spark)
    assert not isinstance(failure, UnavailableError)  # Spark's own exception, from the JVM
    found = kafka_source_error(failure)
    assert isinstance(found, KafkaSourceUnavailableError) and isinstance(found, UnavailableError)
    text = str(found)
    assert text.startswith("Spark's Kafka source could not read from the brokers: ")
    assert "\n" not in text and len(text) < 400
    assert kafka_source_error(ValueError("Cannot fetch record for offset 1 in 5 ms")) is None


def test_follow_retries_the_round_and_a_one_off_run_stops_with_the_line(spark: Any) -> None:
    failure = _failed_read(spark)
    calls = [0]
    warnings: list[str] = []
    waits: list[float] = []

    def run_round() -> bool:
        calls[0] += 1
        if calls[0] == 1:
            raise failure
        raise KeyboardInterrupt  # the second round: the user stops the follower

    with pytest.raises(KeyboardInterrupt):
        follow_rounds(run_round, follow=True, poll_s=1.0, warn=warnings.append,
                      sleep=waits.append)  # fmt: skip
    assert calls[0] == 2 and waits == [0.5]
    assert warnings[0].startswith("round failed: Spark's Kafka source could not read")

    def fails() -> bool:
        raise failure

    with pytest.raises(KafkaSourceUnavailableError) as stopped:
        follow_rounds(fails, follow=False, poll_s=1.0)
    assert stopped.value.__cause__ is failure

    def broken() -> bool:
        raise RuntimeError("a bug, not an outage")

    with pytest.raises(RuntimeError, match="a bug"):
        follow_rounds(broken, follow=True, poll_s=1.0, sleep=waits.append)
