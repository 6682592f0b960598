"""The event-stream contract, run on the real Kafka broker."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from cdc.streams.kafka_stream import KafkaEventStream
from cdc.streams.protocol import EventStream
from tests.cdc.streams.contract import CONTRACT_CHECKS, StreamOpener

pytestmark = pytest.mark.integration


@pytest.fixture
def open_kafka(kafka_bootstrap: str) -> Iterator[StreamOpener]:
    opened: list[KafkaEventStream] = []

    def open_stream() -> EventStream:
        stream = KafkaEventStream.from_url(f"kafka://{kafka_bootstrap}")
        opened.append(stream)
        return stream

    yield open_stream
    for stream in opened:
        stream.close()


@pytest.mark.parametrize("check", CONTRACT_CHECKS, ids=lambda c: c.__name__)
def test_contract(check: Callable[[StreamOpener], None], open_kafka: StreamOpener) -> None:
    check(open_kafka)
