"""The local log's Spark source reads exactly the committed records of a plan's ranges, over
many topics, partitions and segments, compacted or not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc.streams.local import LocalLog
from cdc.streams.protocol import TopicPartition
from replay.reading.local_log import local_log_records, slices_of
from replay.reading.plan import PartitionRange
from replay.reading.sources import RAW_SCHEMA
from tests.cdc.streams.local_log_support import write_txn

pytestmark = pytest.mark.integration


def _write(log: LocalLog) -> None:
    log.ensure_topic("events", 3)
    log.ensure_topic("table", 2, compacted=True)
    for txn in range(6):
        rows = [(i % 3, f"k{i % 7}".encode(), f"v{txn}-{i}".encode() * 5) for i in range(40)]
        write_txn(log, "events", rows, "w")
        keyed = [(i % 2, f"k{i % 5}".encode(), None if i % 9 == 0 else b"x" * i) for i in range(30)]
        write_txn(log, "table", keyed, "w")


def _range(log: LocalLog, topic: str, partition: int, start: int, stop: int) -> PartitionRange:
    bounds = log.bounds(topic, partition)
    return PartitionRange(
        TopicPartition(topic, partition), start, stop, bounds.log_start, bounds.end
    )


def test_reads_exactly_the_ranges(spark: Any, tmp_path: Path) -> None:
    url = f"local://{tmp_path}/log?segment_bytes=2048&sync=false"
    log = LocalLog.from_url(url)
    _write(log)
    log.compact("table")
    ends = {
        (t, p): log.bounds(t, p).end
        for t in ("events", "table")
        for p in range(3 if t == "events" else 2)
    }
    ranges = [
        _range(log, "events", 0, 0, ends["events", 0]),
        _range(log, "events", 1, 7, 61),  # starts and stops inside segments
        _range(log, "events", 2, 30, 30),  # empty
        _range(log, "table", 0, 0, ends["table", 0]),  # compacted: offsets with gaps
        _range(log, "table", 1, 11, ends["table", 1] - 3),
    ]
    assert len(slices_of(log, ranges, slice_offsets=9)) > 10
    frame = local_log_records(spark, url, ranges, slice_offsets=9)
    assert frame.schema == RAW_SCHEMA
    got = sorted(tuple(r) for r in frame.collect())
    expected = sorted(
        (r.topic, r.partition, r.offset, r.key, r.value, r.timestamp_ms)
        for pr in ranges
        for r in log.read(pr.tp.topic, pr.tp.partition, pr.start, pr.stop)
    )
    assert got == expected and len(got) > 100
    assert local_log_records(spark, url, [ranges[2]]).count() == 0
    log.close()
