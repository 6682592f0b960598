"""Small plans read by the driver equal what the executors read, on both streams."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.streams.protocol import EventStream, StreamRecord, TopicPartition
from cdc.streams.registry import open_stream
from replay.reading.bounds import Bound, BoundKind
from replay.reading.plan import PartitionRange, ReplayPlan
from replay.reading.sources import (
    RAW_SCHEMA,
    VALUE_HEAD,
    driver_rows,
    read_by_driver,
    read_ranges,
    read_records,
    whole_value,
)

pytestmark = pytest.mark.integration


@pytest.fixture(params=["local", "kafka"])
def stream(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStream]:
    if request.param == "kafka":
        opened = open_stream(f"kafka://{request.getfixturevalue('kafka_bootstrap')}")
    else:
        opened = open_stream(f"local://{tmp_path}/log")
    yield opened
    opened.close()


def _written(stream: EventStream, topic: str) -> None:
    """Three transactions over 3 partitions (Kafka puts a commit marker after each)."""
    stream.ensure_topic(topic, 3)
    writer = stream.writer(f"{topic}-writer")
    for txn in range(3):
        writer.begin()
        for i in range(30):
            value = None if i % 11 == 0 else f"v{txn}-{i}".encode()
            writer.send(topic, f"k{i % 7}".encode(), value, partition=i % 3)
        writer.commit()
    writer.close()


def _plan(stream: EventStream, topic: str, cut: dict[int, tuple[int, int]]) -> ReplayPlan:
    ranges = []
    for partition, (start, stop) in cut.items():
        bounds = stream.bounds(topic, partition)
        tp = TopicPartition(topic, partition)
        ranges.append(PartitionRange(tp, start, min(stop, bounds.end), 0, bounds.end))
    return ReplayPlan(tuple(ranges), (), Bound(BoundKind.LATEST))


def test_driver_and_executor_reads_agree(
    spark: Any, stream: EventStream, unique_name: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = unique_name("driver-reads")
    _written(stream, topic)
    ends = {p: stream.bounds(topic, p).end for p in range(3)}
    plans = [
        _plan(stream, topic, {p: (0, ends[p]) for p in range(3)}),  # whole, markers at the end
        _plan(stream, topic, {0: (3, 12), 1: (5, 5), 2: (11, ends[2])}),  # middles, an empty one
        _plan(stream, topic, {1: (ends[1] - 1, ends[1])}),  # Kafka: only the last marker
    ]
    for plan in plans:
        small = driver_rows(stream.url, plan)
        assert small is not None
        on_driver = sorted(read_records(spark, stream.url, plan).collect())
        monkeypatch.setenv("REPLICATOR_DRIVER_READ_OFFSETS", "0")
        assert driver_rows(stream.url, plan) is None
        on_executors = sorted(read_records(spark, stream.url, plan).collect())
        monkeypatch.delenv("REPLICATOR_DRIVER_READ_OFFSETS")
        assert on_driver == on_executors == sorted(tuple(r) for r in on_executors)
        assert sorted(small) == [tuple(r) for r in on_executors]
        expected = sum(
            1
            for r in plan.ranges
            for rec in stream.read(topic, r.tp.partition, r.start, r.stop)
        )  # fmt: skip
        assert len(on_driver) == expected


def test_a_plan_past_the_byte_budget_is_read_by_the_executors(
    spark: Any, stream: EventStream, unique_name: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan within the offsets the driver reads whose keys and values hold more than
    ``REPLICATOR_DRIVER_READ_BYTES`` is left to the executors, which read the same records."""
    topic = unique_name("driver-bytes")
    _written(stream, topic)
    plan = _plan(stream, topic, {p: (0, stream.bounds(topic, p).end) for p in range(3)})
    whole = driver_rows(stream.url, plan)
    assert whole is not None
    size = sum(len(r[3] or b"") + len(r[4] or b"") for r in whole)
    monkeypatch.setenv("REPLICATOR_DRIVER_READ_BYTES", str(size - 1))
    monkeypatch.setattr("replay.reading.sources._last_read", None)  # read again, not reused
    assert driver_rows(stream.url, plan) is None and not read_by_driver(stream.url, plan)
    on_executors = sorted(tuple(r) for r in read_records(spark, stream.url, plan).collect())
    assert on_executors == sorted(whole)
    monkeypatch.setenv("REPLICATOR_DRIVER_READ_BYTES", str(size))
    monkeypatch.setattr("replay.reading.sources._last_read", None)
    assert read_by_driver(stream.url, plan) and driver_rows(stream.url, plan) == whole


def test_many_records_are_handed_over_spread_over_the_cores(
    spark: Any, stream: EventStream, unique_name: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From ``_SPREAD_ROWS`` records a driver read reaches Spark as one partition per core, not
    as a local relation (which the optimizer would decode on the driver); the same records, and
    the session's Arrow settings as they were."""
    topic = unique_name("driver-spread")
    _written(stream, topic)
    plan = _plan(stream, topic, {p: (0, stream.bounds(topic, p).end) for p in range(3)})
    settings = ("spark.sql.execution.arrow.localRelationThreshold",
                "spark.sql.execution.arrow.maxRecordsPerBatch")  # fmt: skip
    before = [spark.conf.get(key) for key in settings]
    shapes = {}
    for spread_rows in (10**9, 10):
        monkeypatch.setattr("replay.reading.sources._SPREAD_ROWS", spread_rows)
        monkeypatch.setattr("replay.reading.sources._last_frame", None)  # hand over again
        frame = read_records(spark, stream.url, plan)
        plan_text = frame._jdf.queryExecution().optimizedPlan().toString()
        shapes[spread_rows] = ("LocalRelation" in plan_text, frame.rdd.getNumPartitions())
        assert sorted(tuple(r) for r in frame.collect()) == sorted(
            driver_rows(stream.url, plan) or []
        )
    assert shapes[10**9][0] and not shapes[10][0]
    cores, rows = spark.sparkContext.defaultParallelism, len(driver_rows(stream.url, plan) or [])
    assert shapes[10][1] == -(-rows // -(-rows // cores))  # batches of ceil(rows / cores) rows
    assert [spark.conf.get(key) for key in settings] == before


def test_values_handed_over_without_their_schema_text_are_whole_again(
    spark: Any, stream: EventStream, unique_name: Any
) -> None:
    """With ``cut_prefix`` a driver read hands the values that start with it over as
    ``{"payload":...``; ``whole_value`` gives every value back byte for byte (cut, of another
    schema, without a schema, tombstones), on both paths (the executors' read cuts nothing)."""
    topic = unique_name("driver-cut")
    head = '{"schema":{"type":"struct","fields":[],"name":"one"},"payload":'
    values = [
        (head + '{"op":"c","n":1}}').encode(),
        head.encode().replace(b"one", b"two") + b'{"op":"u"}}',  # another schema: whole
        b'{"payload":{"op":"d"}}',  # no schema
        None,  # a tombstone
        (head + "{not json").encode(),
        head.encode(),  # the prefix alone: an empty payload
    ]
    stream.ensure_topic(topic, 1)
    writer = stream.writer(f"{topic}-writer")
    writer.begin()
    for i, value in enumerate(values):
        writer.send(topic, f"k{i}".encode(), value, partition=0)
    writer.commit()
    writer.close()
    plan = _plan(stream, topic, {0: (0, stream.bounds(topic, 0).end)})
    frame = read_records(spark, stream.url, plan, cut_prefix=head)
    assert VALUE_HEAD in frame.columns
    handed = {r["offset"]: r["value"] for r in frame.collect()}
    assert handed[0] == b'{"payload":{"op":"c","n":1}}' and handed[1] == values[1]
    assert handed[5] == b'{"payload":'
    whole = frame.select("offset", whole_value(frame).alias("v")).collect()
    assert [bytes(r["v"]) if r["v"] is not None else None for r in sorted(whole)] == values
    assert read_records(spark, stream.url, plan).columns == RAW_SCHEMA.fieldNames()
    executors = _executor_records(spark, stream, plan)
    assert VALUE_HEAD not in executors.columns
    assert [r["value"] for r in sorted(executors.collect(), key=lambda r: r["offset"])] == values


def _executor_records(spark: Any, stream: EventStream, plan: ReplayPlan) -> Any:
    with pytest.MonkeyPatch.context() as patched:
        patched.setenv("REPLICATOR_DRIVER_READ_OFFSETS", "0")
        return read_records(spark, stream.url, plan, cut_prefix="{").localCheckpoint()


def test_read_ranges_reads_each_range_through_one_reader(
    stream: EventStream, unique_name: Any
) -> None:
    topic = unique_name("ranges")
    _written(stream, topic)
    ends = {p: stream.bounds(topic, p).end for p in range(3)}
    plan = _plan(stream, topic, {0: (2, 9), 1: (0, ends[1]), 2: (ends[2], ends[2])})
    got = [(r.partition, r.offset, r.key, r.value) for r in read_ranges(stream, plan.ranges)]
    want = [
        (r.partition, r.offset, r.key, r.value)
        for part in plan.ranges
        for r in stream.read(topic, part.tp.partition, part.start, part.stop)
    ]
    assert sorted(got, key=lambda x: (x[0], x[1])) == want
    assert [o for p, o, _, _ in got if p == 0] == sorted(o for p, o, _, _ in got if p == 0)


class _QuietReader:
    """A reader of one partition whose records end before a commit marker (offset 3) and
    whose first poll also reached the partition's end: nothing more will come."""

    def __init__(self) -> None:
        self.polls = 0

    def poll(self, max_records: int = 10_000, timeout_s: float = 1.0) -> list[StreamRecord]:
        self.polls += 1
        if self.polls > 1:  # a real reader would wait timeout_s here
            return []
        return [StreamRecord("t", 0, o, b"k", b"v", 0) for o in range(3)]

    def position(self, topic: str, partition: int) -> int:
        return 4 if self.polls else 0  # past the marker once the end was reached

    def close(self) -> None:
        pass


class _QuietStream:
    def __init__(self) -> None:
        self.opened = _QuietReader()

    def reader(self, positions: Any) -> _QuietReader:
        return self.opened


def test_a_range_ending_in_a_marker_is_done_without_waiting_for_another_poll() -> None:
    """The end of a range without a record at its last offset is seen from the position after
    the poll that reached it, not from a later poll that finds nothing (a poll's timeout on a
    quiet stream: a second a follow round would wait)."""
    quiet = _QuietStream()
    ranges = [PartitionRange(TopicPartition("t", 0), 0, 4, 0, 4)]
    got = [r.offset for r in read_ranges(quiet, ranges)]  # type: ignore[arg-type]
    assert got == [0, 1, 2]
    assert quiet.opened.polls == 1
