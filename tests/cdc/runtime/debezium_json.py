"""Plain-JSON reading of captured Debezium topics: records, payloads, logical-type values."""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
from decimal import Decimal
from typing import Any

from cdc.streams.kafka_stream import KafkaEventStream
from cdc.streams.protocol import StreamRecord, TopicPartition

_EPOCH_DAY = dt.date(1970, 1, 1)


def read_topic(stream: KafkaEventStream, topic: str) -> list[StreamRecord]:
    """Every record of ``topic``, partition by partition, in offset order."""
    partitions = range(stream.partition_count(topic))
    starts = {TopicPartition(topic, p): stream.bounds(topic, p).log_start for p in partitions}
    reader = stream.reader(starts)
    records: list[StreamRecord] = []
    deadline = time.monotonic() + 30
    try:
        while len(reader.at_end) < len(partitions):
            assert time.monotonic() < deadline, f"{topic} did not reach its end in 30s"
            records += reader.poll(10_000, 0.1)
    finally:
        reader.close()
    return sorted(records, key=lambda r: (r.partition, r.offset))


def payload(raw: bytes | None) -> Any:
    """The payload of a JsonConverter record, with or without its schema."""
    if raw is None:
        return None
    document = json.loads(raw)
    return document["payload"] if isinstance(document, dict) and "schema" in document else document


def decimal_value(text: str | None, scale: int = 2) -> Decimal | None:
    """``org.apache.kafka.connect.data.Decimal`` (base64 big-endian unscaled value)."""
    if text is None:
        return None
    unscaled = int.from_bytes(base64.b64decode(text), "big", signed=True)
    return Decimal(unscaled).scaleb(-scale)


def instant_value(text: str | None) -> dt.datetime | None:
    """``io.debezium.time.ZonedTimestamp`` (ISO-8601 text)."""
    return None if text is None else dt.datetime.fromisoformat(text)


def date_value(days: int | None) -> dt.date | None:
    """``io.debezium.time.Date`` (days since the epoch)."""
    return None if days is None else _EPOCH_DAY + dt.timedelta(days=days)
