"""What a replay learns of its topics before Spark starts: the records they store, on both
streams (the local log and the Kafka broker)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cdc.streams.protocol import EventStream
from cdc.streams.registry import open_stream
from replay.reading.plan import stored_records

pytestmark = pytest.mark.integration


@pytest.fixture(params=["local", "kafka"])
def stream(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStream]:
    if request.param == "kafka":
        url = f"kafka://{request.getfixturevalue('kafka_bootstrap')}"
    else:
        url = f"local://{tmp_path}/log"
    opened = open_stream(url)
    yield opened
    opened.close()


def _written(stream: EventStream, topic: str, partitions: int, records: int, writer: str) -> None:
    stream.ensure_topic(topic, partitions)
    sender = stream.writer(writer)
    sender.begin()
    for i in range(records):
        sender.send(topic, f"k{i}".encode(), b"v", partition=i % partitions)
    sender.commit()
    sender.close()


def test_stored_records_count_every_partition_and_stop_past_the_limit(
    stream: EventStream, unique_name: Callable[[str], str]
) -> None:
    first, second = unique_name("stored"), unique_name("stored")
    _written(stream, first, 3, 10, unique_name("writer"))
    _written(stream, second, 1, 4, unique_name("writer"))
    # Offsets, not records: a transaction's commit marker takes one in each partition it wrote.
    one = stored_records(stream, [first], limit=100)
    assert one is not None and 10 <= one <= 10 + 3
    both = stored_records(stream, [first, second], limit=100)
    assert both is not None and one + 4 <= both <= one + 4 + 1
    assert stored_records(stream, [first, second], limit=both) == both
    assert stored_records(stream, [first, second], limit=both - 1) is None


def test_stored_records_are_not_counted_over_too_many_partitions(
    stream: EventStream, unique_name: Callable[[str], str]
) -> None:
    wide = unique_name("wide")
    stream.ensure_topic(wide, 65)
    assert stored_records(stream, [wide], limit=10**9) is None
