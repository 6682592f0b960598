"""Input events as the user's function sees them, and dead-letter records for bad ones."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple

from cdc import json_bytes
from cdc.connector import OutRecord
from cdc.streams.protocol import StreamRecord


class RejectEvent(Exception):
    """Raised by a decoder or handler: send this input event to the dead-letter topic."""


class InputEvent(NamedTuple):
    """One input record, its key and value decoded (JSON by default, numbers as Decimal); a
    named tuple, as one is made per record."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: Any
    value: Any


Decoder = Callable[[StreamRecord], InputEvent]


# A JSON text starts with whitespace, a value, or a BOM/UTF-16/32 byte; keys starting with any
# other ASCII letter (ids like "c17") are text without paying for a failed parse.
_NOT_JSON_START = frozenset(b"abcdeghijklmopqrsuvwxyzABCDEFGHJKLMOPQRSTUVWXYZ")


_loads = json_bytes.loads_decimal


def _key(raw: bytes) -> Any:
    if not raw or raw[0] not in _NOT_JSON_START:
        try:
            return _loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            pass
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return raw


def json_decoder(record: StreamRecord) -> InputEvent:
    """Decode the value as JSON (non-integral numbers as ``Decimal``, never float); the key as
    JSON when it is JSON, else as text (else bytes)."""
    key = None if record.key is None else _key(record.key)
    try:
        value = None if record.value is None else _loads(record.value)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RejectEvent(f"not JSON: {exc}") from exc
    return InputEvent(
        record.topic, record.partition, record.offset, record.timestamp_ms, key, value
    )


def dead_letter(topic: str, record: StreamRecord, reason: str) -> OutRecord:
    """The dead-letter record of ``record``: its key and value unchanged (so it can be
    re-driven), the reason and origin in headers (like Kafka Connect's DLQ context headers)."""
    headers = (
        ("replicator.error.reason", reason.encode()),
        ("replicator.error.topic", record.topic.encode()),
        ("replicator.error.partition", str(record.partition).encode()),
        ("replicator.error.offset", str(record.offset).encode()),
        ("replicator.error.timestamp", str(record.timestamp_ms).encode()),
    )
    return OutRecord(topic, record.key, record.value, None, headers)
