"""A Kafka event stream on the session's broker, for the tests of the Kafka stream itself."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cdc.streams.kafka_stream import KafkaEventStream


@pytest.fixture
def stream(kafka_bootstrap: str) -> Iterator[KafkaEventStream]:
    s = KafkaEventStream.from_url(f"kafka://{kafka_bootstrap}")
    yield s
    s.close()
