"""Catch-up batches around a Debezium truncate, which lands in one partition of the topic."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.streams.local import LocalLog
from cdc.streams.protocol import TopicPartition
from replay.decode.truncates import Truncate
from replay.reading.bounds import Bound, BoundKind
from replay.reading.plan import PartitionRange, ReplayPlan
from replay.sinks.registry import open_sink
from replay.tables.batches import cut_batches
from replay.tables.engine import ReplayEngine, ReplayJob
from tests.replay.decode.conftest import published

TOPIC, TABLE = "pg.inventory.products", "products"

Event = tuple[int, int, str, int | None]
"""(partition, LSN, op ``c``/``u``/``d``/``t``, row id: None for the truncate)."""

BEFORE: list[Event] = [(p, 10 + k, "c", k) for k in range(1, 7) for p in [(k - 1) % 3]]
"""The rows 1..6 (partition (id - 1) % 3), rebuilt before the catch-up."""
AFTER: list[Event] = [
    # Partition 0: the truncate behind three changes.
    (0, 101, "u", 1), (0, 102, "u", 1), (0, 103, "u", 1), (0, 200, "t", None), (0, 301, "u", 4),
    # Partition 1: soon past the truncate (a batch of offsets would apply 250 before it).
    (1, 150, "u", 2), (1, 250, "u", 5), (1, 270, "d", 2),
    # Partition 2: long before it (a batch of offsets would apply 107, 108 after it).
    (2, 104, "u", 3), (2, 105, "u", 3), (2, 106, "u", 3), (2, 107, "u", 3), (2, 108, "u", 3),
    (2, 310, "u", 6),
]  # fmt: skip


def _record(lsn: int, op: str, row_id: int | None) -> tuple[bytes | None, bytes]:
    """A Debezium PostgreSQL change record (key, value) at ``lsn`` (its own transaction)."""
    document = json.loads(published("pg_1x_create_with_schema.json"))
    payload = document["payload"]
    image = (
        None if row_id is None else {**payload["after"], "id": row_id, "name": f"{row_id}@{lsn}"}
    )
    payload["before"] = image if op in ("u", "d") else None
    payload["after"] = image if op in ("c", "u") else None
    payload["op"] = op
    payload["source"] = {**payload["source"], "lsn": lsn, "txId": lsn, "ts_ms": lsn}
    key = None if row_id is None else json.dumps({"id": row_id}).encode()
    return key, json.dumps(document).encode()


def _write(log: LocalLog, events: list[Event]) -> None:
    writer = log.writer("debezium")
    writer.begin()
    for partition, lsn, op, row_id in events:
        key, value = _record(lsn, op, row_id)
        writer.send(TOPIC, key, value, partition=partition, timestamp_ms=1_700_000_000_000 + lsn)
    writer.commit()
    writer.close()


def _folded(events: list[Event]) -> dict[int, str]:
    """The table the events leave, applied one by one in LSN order: id -> name."""
    table: dict[int, str] = {}
    for _, lsn, op, row_id in sorted(events, key=lambda e: e[1]):
        if op == "t":
            table.clear()
        elif op == "d":
            table.pop(row_id or 0, None)
        else:
            table[row_id or 0] = f"{row_id}@{lsn}"
    return table


def _rows(sink: Any) -> dict[int, str]:
    return {r["id"]: r["name"] for r in sink.read(TABLE).collect()}


def test_a_one_partition_truncate_stops_the_others_where_its_source_position_is() -> None:
    tps = [TopicPartition("t", p) for p in range(3)]
    plan = ReplayPlan(
        tuple(PartitionRange(tp, 0, 10, 0, 10) for tp in tps), (), Bound(BoundKind.LATEST)
    )
    source = f"{200:032x}"
    truncate = Truncate(f"{source}{0:010d}{6:020d}", tps[0], 6)
    reach = {source: {tps[1]: 2, tps[2]: 9}}
    stops = [b.stop_positions for b in cut_batches(plan, 6, [truncate], reach)]
    # partition 1 waits at 2, partition 2 runs on to 9: the next batch starts at the truncate
    assert {tps[0]: 6, tps[1]: 2, tps[2]: 9} in stops
    for before, after in zip([{tp: 0 for tp in tps}, *stops], stops, strict=False):
        if before[tps[0]] <= 6 < after[tps[0]]:
            assert before == {tps[0]: 6, tps[1]: 2, tps[2]: 9}
    assert stops[-1] == {tp: 10 for tp in tps}
    # without a reach (our own changelog's truncates are on every partition) nothing waits
    assert cut_batches(plan, 6, [truncate])[0].stop_positions == {tp: 2 for tp in tps}


@pytest.fixture
def log(tmp_path: Path, spark: Any) -> Iterator[LocalLog]:
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    stream = LocalLog.from_url(f"local://{tmp_path}/log")
    stream.ensure_topic(TOPIC, 3)
    yield stream
    stream.close()
    spark.conf.set("spark.sql.shuffle.partitions", previous)


@pytest.mark.integration
def test_catch_up_over_a_one_partition_truncate_equals_the_rebuild(
    log: LocalLog, spark: Any, tmp_path: Path
) -> None:
    expected = _folded(BEFORE + AFTER)
    assert expected == {4: "4@301", 5: "5@250", 6: "6@310"}
    _write(log, BEFORE)
    sinks = [open_sink(f"duckdb://{tmp_path}/catch-up.duckdb", spark)]
    sinks.append(open_sink(f"delta://{tmp_path}/delta", spark))
    for sink in sinks:
        (result,) = ReplayEngine(spark, log, sink).run(ReplayJob((TOPIC,)))
        assert result.mode == "rebuild" and _rows(sink) == _folded(BEFORE)

    _write(log, AFTER)
    rebuilt = open_sink(f"duckdb://{tmp_path}/rebuilt.duckdb", spark)
    (result,) = ReplayEngine(spark, log, rebuilt).run(ReplayJob((TOPIC,)))
    assert result.mode == "rebuild" and _rows(rebuilt) == expected
    job = ReplayJob((TOPIC,), start=Bound(BoundKind.LEDGER), batch_offsets=3)
    for sink in sinks:
        (result,) = ReplayEngine(spark, log, sink).run(job)
        assert result.mode == "catch-up" and len(result.entries) > 2
        assert _rows(sink) == expected, sink.url
    for sink in [*sinks, rebuilt]:
        sink.close()
