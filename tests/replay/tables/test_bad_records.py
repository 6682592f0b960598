"""Bad records in a catch-up batch: the write's own job finds them (``Sink.merge`` refuses a
batch that marks any, before writing), then the ``--on-error`` policy applies as before:
``fail`` names the record and leaves the table and its ledger as they were, ``dead-letter``
sets it aside and applies the rest of the batch. Both sinks, decoded once (cached) or twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc.errors import ChangeEventError
from cdc.streams.local import LocalLog
from projections import SqlProjection
from projections.change_ops import RowChange
from replay.decode.schema import value_prefix
from replay.projection.engine import ProjectionEngine, ProjectionJob
from replay.reading.bounds import Bound, BoundKind
from replay.sinks.protocol import DEAD_LETTER_TABLE
from replay.sinks.registry import open_sink
from replay.tables.engine import ReplayEngine, ReplayJob
from replay.tables.topic_schema import ReplayError
from tests.replay.cli.test_live_duckdb_readers import sale_row
from tests.replay.projection.workload import SalesTopic

pytestmark = pytest.mark.integration
TABLE = "movie_ticket_sales"


def _seats(sink: Any) -> dict[int, int]:
    return {r["id"]: r["seats"] for r in sink.read(TABLE).collect()}


def _sales_replay(
    spark: Any, tmp_path: Path, kind: str, *, rows: int
) -> tuple[LocalLog, SalesTopic, Any, ReplayEngine]:
    """A local log with ``rows`` sales rows created, a ``kind`` sink and an engine over both."""
    log = LocalLog.from_url(f"local://{tmp_path}/log")
    topic = SalesTopic(log, partitions=1)
    topic.write(RowChange("c", None, sale_row(i, 1)) for i in range(rows))
    sink = open_sink(f"{kind}://{tmp_path}/out" + (".duckdb" if kind == "duckdb" else ""), spark)
    return log, topic, sink, ReplayEngine(spark, log, sink)


@pytest.mark.parametrize("driver_reads", ["50000", "0"], ids=["decoded-in-write", "decoded-once"])
@pytest.mark.parametrize("kind", ["duckdb", "delta"])
def test_a_bad_record_in_a_catch_up_fails_cleanly_or_is_dead_lettered(
    spark: Any, tmp_path: Path, kind: str, driver_reads: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPLICATOR_DRIVER_READ_OFFSETS", driver_reads)
    log, topic, sink, engine = _sales_replay(spark, tmp_path, kind, rows=20)
    engine.run(ReplayJob((topic.topic,)))
    built = sink.positions(TABLE)

    topic.write(RowChange("u", None, sale_row(i, 2)) for i in range(0, 20, 2))
    writer = log.writer("a-broken-feeder")
    writer.begin()
    writer.send(topic.topic, b'{"id":3}', b"{not json")
    writer.commit()
    writer.close()
    bad_offset = next(r.offset for r in log.read(topic.topic, 0, 0) if r.value == b"{not json")
    topic.write([RowChange("u", None, sale_row(3, 5))])
    catch_up = ReplayJob((topic.topic,), start=Bound(BoundKind.LEDGER))

    with pytest.raises(ChangeEventError, match=f"offset {bad_offset}") as failed:
        engine.run(catch_up)
    assert "not JSON" in str(failed.value) and str(failed.value).count(f"offset {bad_offset}") == 1
    assert sink.positions(TABLE) == built and set(_seats(sink).values()) == {1}

    (result,) = engine.run(ReplayJob(catch_up.topics, start=catch_up.start, on_error="dead-letter"))
    assert result.bad == 1
    expected = {i: 2 if i % 2 == 0 else 1 for i in range(20)} | {3: 5}
    assert _seats(sink) == expected
    assert sink.positions(TABLE) == {tp: log.bounds(*tp).end for tp in built}
    letters = sink.read(DEAD_LETTER_TABLE).collect()
    assert [(r["offset"], r["value"]) for r in letters] == [(bad_offset, b"{not json")]
    sink.close()
    log.close()


@pytest.mark.parametrize("driver_reads", ["50000", "0"], ids=["read-by-driver", "executors"])
@pytest.mark.parametrize("kind", ["duckdb", "delta"])
@pytest.mark.parametrize("mode", ["rebuild", "catch-up"])
def test_a_dead_letter_keeps_the_schema_text_a_read_cut_off(
    spark: Any, tmp_path: Path, kind: str, driver_reads: str, mode: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A catch-up the driver reads hands its values over without the topic's schema text
    (``read_records(cut_prefix=...)``); a rejected record is dead-lettered as the stream holds
    it, schema included, with the parser's reason, as by a rebuild or the executors' read."""
    monkeypatch.setenv("REPLICATOR_DRIVER_READ_OFFSETS", driver_reads)
    log, topic, sink, engine = _sales_replay(spark, tmp_path, kind, rows=6)
    if mode == "catch-up":
        engine.run(ReplayJob((topic.topic,)))
    good = next(r.value for r in log.read(topic.topic, 0, 0) if r.value)
    head = (value_prefix(good) or "").encode()
    assert head and len(head) > len(good) // 2  # most of a value is its schema
    bad = [head + b'{"op":"u","after":{"id":40', head + b'{"op":"u","source":null}}']
    topic.write(RowChange("u", None, sale_row(i, 2)) for i in range(3))
    writer = log.writer("a-broken-feeder")
    writer.begin()
    for key, value in zip((b'{"id":40}', b'{"id":41}'), bad, strict=True):
        writer.send(topic.topic, key, value)
    writer.commit()
    writer.close()
    start = Bound(BoundKind.LEDGER) if mode == "catch-up" else Bound(BoundKind.EARLIEST)
    (result,) = engine.run(ReplayJob((topic.topic,), start=start, on_error="dead-letter"))
    assert result.mode == mode and result.bad == 2
    assert _seats(sink) == {0: 2, 1: 2, 2: 2, 3: 1, 4: 1, 5: 1}
    letters = sorted(sink.read(DEAD_LETTER_TABLE).collect(), key=lambda r: r["offset"])
    assert [bytes(r["value"]) for r in letters] == bad
    assert "JSON" in letters[0]["reason"] and "source" in letters[1]["reason"]
    sink.close()
    log.close()


def test_a_newest_record_that_is_not_json_is_a_bad_record_not_the_schema(
    spark: Any, tmp_path: Path
) -> None:
    log = LocalLog.from_url(f"local://{tmp_path}/log")
    topic = SalesTopic(log, partitions=1)
    topic.write(RowChange("c", None, sale_row(i, 1)) for i in range(5))
    writer = log.writer("a-broken-feeder")
    writer.begin()
    writer.send(topic.topic, b'{"id":3}', b"{not json")  # the topic's newest record
    writer.commit()
    writer.close()
    bad_offset = next(r.offset for r in log.read(topic.topic, 0, 0) if r.value == b"{not json")
    sink = open_sink(f"duckdb://{tmp_path}/out.duckdb", spark)
    engine = ReplayEngine(spark, log, sink)

    with pytest.raises(ChangeEventError, match=f"offset {bad_offset}"):
        engine.run(ReplayJob((topic.topic,)))
    (result,) = engine.run(ReplayJob((topic.topic,), on_error="dead-letter"))
    assert result.bad == 1 and _seats(sink) == dict.fromkeys(range(5), 1)
    letters = sink.read(DEAD_LETTER_TABLE).collect()
    assert [(r["offset"], r["value"]) for r in letters] == [(bad_offset, b"{not json")]
    sink.close()
    log.close()


def test_a_tail_of_records_that_are_not_json_is_named_not_waited_on(
    spark: Any, tmp_path: Path
) -> None:
    """No JSON object among the last records of any partition: no schema to read. Both engines
    name the newest of those records (neither reports an empty topic nor waits for events)."""
    log = LocalLog.from_url(f"local://{tmp_path}/log")
    topic = SalesTopic(log, partitions=2)
    writer = log.writer("a-broken-feeder")
    writer.begin()
    for i in range(3):
        key, stamp = f'{{"id":{i}}}'.encode(), 1_700_000_000_000 + i
        writer.send(topic.topic, key, b"{not json", partition=i % 2, timestamp_ms=stamp)
    writer.commit()
    writer.close()
    newest = [r for r in log.read(topic.topic, 0, 0) if r.value == b"{not json"][-1]
    where = f"partition 0, offset {newest.offset}: not a JSON change event"
    sink = open_sink(f"duckdb://{tmp_path}/out.duckdb", spark)

    with pytest.raises(ReplayError, match=where):
        ReplayEngine(spark, log, sink).run(ReplayJob((topic.topic,)))
    projection = SqlProjection.parse(
        f"CREATE TABLE sold AS SELECT title, count(*) AS n FROM {TABLE} GROUP BY title"
    )
    with pytest.raises(ReplayError, match=where):
        ProjectionEngine(spark, log, sink).run(ProjectionJob(projection, topic.topic))
    assert sink.tables() == []
    sink.close()
    log.close()
