"""What a replay names and decodes a topic by: its target table, and the schema of its newest
change event (the engine's default when the run's range holds no schema versions).

The newest event is looked for among the last 64 offsets of every partition, by record
timestamp: a topic's partitions may be written at different times, and the newest schema is
the one a later write of the table would carry.
"""

from __future__ import annotations

from collections.abc import Callable

from cdc.errors import UserError
from cdc.events.columns import TableSpec as DeclaredTable
from cdc.events.json_text import loads
from cdc.streams.protocol import EventStream, StreamRecord, TopicPartition
from replay.decode.schema import TopicSchema
from replay.reading.plan import PartitionRange
from replay.reading.sources import read_ranges

TAIL_OFFSETS = 64
"""How far back from each partition's end the newest change event is looked for."""


class ReplayError(UserError, RuntimeError):
    """A replay cannot go on; the message names the topic (and record, if one is at fault)."""


def target_table(topic: str) -> str:
    """The table a topic mirrors: its last dotted part (``server.schema.table`` -> ``table``)."""
    return topic.rsplit(".", 1)[-1]


def newest_record(
    stream: EventStream, topic: str, wanted: Callable[[StreamRecord], bool] = lambda r: True
) -> StreamRecord | None:
    """The newest record (by timestamp) among the last ``TAIL_OFFSETS`` of each partition of
    ``topic`` that is ``wanted`` and whose value is a JSON object; None if there is none.
    A value that is not cannot hold a schema: it is a bad record, which the decode reports
    with its place (a newest record that is not JSON must not stop the whole replay)."""
    return next((r for r in _tail(stream, topic, wanted) if _is_json_object(r.value)), None)


def unreadable_tail(stream: EventStream, topic: str) -> ReplayError | None:
    """The error for a topic whose tail holds records but none a JSON object (the newest
    named by its place), so that it has no schema to read; None for any other topic."""
    bad = next((r for r in _tail(stream, topic) if not _is_json_object(r.value)), None)
    if bad is None:
        return None
    return ReplayError(
        f"topic {bad.topic}, partition {bad.partition}, offset {bad.offset}: not a JSON change "
        f"event; no row event among the last {TAIL_OFFSETS} records of any partition to read "
        "the topic's schema from; declare its table with --schema to decode it and report the"
        " bad records"
    )


def _tail(
    stream: EventStream, topic: str, wanted: Callable[[StreamRecord], bool] = lambda r: True
) -> list[StreamRecord]:
    """The ``wanted`` records with a value among the last ``TAIL_OFFSETS`` of each partition,
    newest first (by timestamp; of equal timestamps the one read last)."""
    tail = []
    for partition in range(stream.partition_count(topic)):
        bounds = stream.bounds(topic, partition)
        start = max(bounds.log_start, bounds.end - TAIL_OFFSETS)
        tp = TopicPartition(topic, partition)
        tail.append(PartitionRange(tp, start, bounds.end, bounds.log_start, bounds.end))
    found = [r for r in read_ranges(stream, tail) if r.value is not None and wanted(r)]
    return sorted(reversed(found), key=lambda r: r.timestamp_ms, reverse=True)


def _is_json_object(value: bytes | None) -> bool:
    try:
        return value is not None and isinstance(loads(value.decode()), dict)
    except ValueError:  # not UTF-8 or not JSON
        return False


def newest_schema(stream: EventStream, topic: str, declared: DeclaredTable | None) -> TopicSchema:
    """The schema of the topic's newest change event, else ``declared``; a ``ReplayError`` if
    it has neither."""
    newest = newest_record(stream, topic)
    if newest is None or newest.value is None:
        if declared is None:
            raise unreadable_tail(stream, topic) or ReplayError(
                f"topic {topic} holds no change event to read its schema from"
            )
        return TopicSchema.from_table(declared)
    return TopicSchema.from_record(newest.value, newest.key, declared, topic=topic)
