"""Compaction in one read (``compacted_read``) against the two Spark passes, on both streams."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.streams.protocol import EventStream, TopicPartition
from cdc.streams.registry import open_stream
from replay.decode.compacted_read import (
    compact_range,
    compacted_records,
    is_over_budget,
    persisted_decode,
)
from replay.decode.compaction import (
    Survey,
    decoded_latest,
    latest_records,
    rebuild_table,
    survey,
)
from replay.reading.bounds import Bound, BoundKind
from replay.reading.plan import PartitionRange, ReplayPlan, plan_replay
from replay.reading.sources import read_records
from replay.sinks.registry import open_sink
from replay.tables.engine import ReplayEngine, ReplayJob
from tests.replay.decode.conftest import Changelog, comparable
from tests.replay.decode.test_compaction import _history, _schema

pytestmark = pytest.mark.integration


@pytest.fixture(params=["local", "kafka"])
def history_stream(
    request: pytest.FixtureRequest, tmp_path: Path, unique_name: Any
) -> Iterator[tuple[EventStream, Changelog, dict[int, dict[str, Any]]]]:
    """The compaction history (truncates, deletes, a key in two partitions, bad-free) written
    record by record to its partitions of a real stream: the local log or the Kafka broker."""
    if request.param == "kafka":
        url = f"kafka://{request.getfixturevalue('kafka_bootstrap')}"
    else:
        url = f"local://{tmp_path}/log"
    stream = open_stream(url)
    log, table = _history()
    topic = unique_name("compacted")
    stream.ensure_topic(topic, log.partitions, compacted=True)
    writer = stream.writer(unique_name("writer"))
    writer.begin()
    for _, partition, _, key, value, _ in log.records:
        writer.send(topic, key, value, partition=partition)
    writer.commit()
    writer.close()
    log.topic = topic
    yield stream, log, table
    stream.close()


def _plan(stream: EventStream, topic: str) -> ReplayPlan:
    return plan_replay(stream, [topic], Bound(BoundKind.EARLIEST), Bound(BoundKind.LATEST))


def test_one_read_equals_the_two_passes_and_rebuilds_the_table(
    spark: Any, history_stream: tuple[EventStream, Changelog, dict[int, dict[str, Any]]]
) -> None:
    stream, log, table = history_stream
    plan = _plan(stream, log.topic)
    one_read = compacted_records(spark, stream.url, plan).persist()
    two_passes = latest_records(read_records(spark, stream.url, plan))
    columns = two_passes.columns
    assert sorted(one_read.select(*columns).collect()) == sorted(two_passes.collect())
    assert one_read.where("__candidate IS NOT NULL").count() == log.partitions  # the truncates
    one_read.unpersist()
    decoded, persisted, found = persisted_decode(spark, stream.url, plan, _schema(log))
    assert persisted == [decoded] and decoded.is_cached
    assert found._replace(live=None, live_bytes=None, keys=None) == Survey(True, False, False)
    assert found.keys is not None and found.keys >= len(table)
    # The tasks' key digests (keys 9 and 10 are in two partitions) say what Spark counts
    assert found.repeated and found == survey(decoded, _schema(log))
    rebuild = rebuild_table(decoded, _schema(log), found)
    rows = sorted((comparable(r) for r in rebuild.rows().collect()), key=lambda r: r["id"])
    assert rows == [comparable(table[k]) for k in sorted(table)]
    assert rebuild.truncates.count() == log.partitions and rebuild.bad.count() == 0
    decoded.unpersist()


def _cached_bytes(spark: Any, besides: set[int]) -> int:
    """The memory of the cached RDDs other than those of ids ``besides``."""
    infos = spark.sparkContext._jsc.sc().getRDDStorageInfo()
    return sum(i.memSize() for i in infos if i.id() not in besides)


def test_the_decode_is_cached_without_compression(
    spark: Any, history_stream: tuple[EventStream, Changelog, dict[int, dict[str, Any]]]
) -> None:
    """The rebuild's cache of its decode skips the columns' compression (the session's
    setting is left as it was): larger than the same rows cached compressed."""
    stream, log, _ = history_stream
    plan = _plan(stream, log.topic)
    cached = {i.id() for i in spark.sparkContext._jsc.sc().getRDDStorageInfo()}
    decoded, _, _ = persisted_decode(spark, stream.url, plan, _schema(log))
    assert spark.conf.get("spark.sql.inMemoryColumnarStorage.compressed") == "true"
    plain = _cached_bytes(spark, cached)
    decoded.unpersist(blocking=True)
    again = decoded_latest(compacted_records(spark, stream.url, plan), _schema(log)).persist()
    assert again.count() == decoded.count()
    assert 0 < _cached_bytes(spark, cached) < plain
    again.unpersist(blocking=True)


def test_a_task_over_its_budget_names_its_partition(
    spark: Any, history_stream: tuple[EventStream, Changelog, dict[int, dict[str, Any]]]
) -> None:
    stream, log, _ = history_stream
    with pytest.raises(Exception) as caught:
        compacted_records(spark, stream.url, _plan(stream, log.topic), task_bytes=1).count()
    assert is_over_budget(caught.value)
    assert f"{log.topic} partition " in str(caught.value)


@pytest.mark.parametrize("history_stream", ["local"], indirect=True)
def test_the_engine_falls_back_to_the_two_passes_over_budget(
    spark: Any,
    history_stream: tuple[EventStream, Changelog, dict[int, dict[str, Any]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    stream, log, table = history_stream
    monkeypatch.setenv("REPLICATOR_COMPACT_TASK_MB", "0")
    sink = open_sink(f"duckdb://{tmp_path}/fallback.duckdb", spark)
    with caplog.at_level(logging.WARNING, logger="replay.decode.compacted_read"):
        (result,) = ReplayEngine(spark, stream, sink).run(ReplayJob((log.topic,)))
    assert result.mode == "rebuild"
    assert any("compacting by two Spark passes" in r.getMessage() for r in caplog.records)
    rows = sorted((comparable(r) for r in sink.read(result.table).collect()), key=lambda r: r["id"])
    assert rows == [comparable(table[k]) for k in sorted(table)]


def test_a_range_keeps_per_key_the_newest_record_and_the_newest_with_a_value(
    tmp_path: Path,
) -> None:
    stream = open_stream(f"local://{tmp_path}/log")
    stream.ensure_topic("t", 1)
    writer = stream.writer("w")
    writer.begin()
    history = [(b"a", b"a1"), (b"b", None), (b"a", None), (b"c", b"c1"), (b"c", None),
               (b"c", b"c2"), (b"d", b"d1"), (b"e", None), (b"e", b"e1"), (b"e", None)]  # fmt: skip
    for key, value in history:
        writer.send("t", key, value, partition=0)
    writer.commit()
    writer.close()
    end = stream.bounds("t", 0).end
    whole = PartitionRange(TopicPartition("t", 0), 0, end, 0, end)
    rows = list(compact_range(stream.url, whole, 1 << 30))
    stream.close()
    # key -> (offset of the newest record, offset and value of the newest with a value)
    got = {row[2]: (row[4], row[7], row[8]) for row in rows}
    assert got == {
        b"a": (2, 0, b"a1"), b"b": (1, None, None), b"c": (5, 5, b"c2"),
        b"d": (6, 6, b"d1"), b"e": (9, 8, b"e1"),
    }  # fmt: skip
    assert all(row[3] is None and row[5] is None for row in rows)  # no truncate candidate
