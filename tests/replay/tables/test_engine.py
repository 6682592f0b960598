"""The replay engine end to end: a processor's changelog replayed on Spark into DuckDB and Delta,
equal to each other and to the processor's own state; catch-up from the ledger; point in time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc.examples import PAYMENTS_PER_CUSTOMER, count_payment
from cdc.processor import EventProcessor, ProcessorConfig
from cdc.streams.local import LocalLog
from replay.progress import ReplayProgress
from replay.reading.bounds import Bound, BoundKind
from replay.sinks import duckdb_files, duckdb_sink
from replay.sinks.duckdb_sink import DuckDBSink
from replay.sinks.registry import open_sink
from replay.tables.engine import ReplayEngine, ReplayJob
from replay.verify import verify_tables
from tests.cdc.processor.test_processor import expected_totals, payments, produce
from tests.replay.tables.crash_trials import rows_of
from tests.replay.tables.crash_worker import replay_to_end
from tests.replay.tables.trial_changelog import build_changelog, fold, input_events

TOPIC = "payments.payments_per_customer"


@pytest.fixture
def log(tmp_path: Path) -> Iterator[LocalLog]:
    stream = LocalLog.from_url(f"local://{tmp_path}/log")
    stream.ensure_topic("payments-in", 2)
    yield stream
    stream.close()


def process(log: LocalLog, events: list[dict[str, str]]) -> None:
    produce(log, "payments-in", [json.dumps(e).encode() for e in events])
    config = ProcessorConfig("payments", ("payments-in",), commit_max_events=97)
    processor = EventProcessor(config, log, [PAYMENTS_PER_CUSTOMER], count_payment)
    processor.start()
    processor.run(idle_timeout_s=0.3)
    processor.close()


def as_totals(rows: list[Any]) -> dict[str, tuple[int, Decimal]]:
    return {r["customer_id"]: (r["payments"], r["total_amount"]) for r in rows}


@pytest.mark.parametrize("driver_reads", ["50000", "0"], ids=["decoded-in-write", "decoded-once"])
def test_replay_into_duckdb_and_delta(
    log: LocalLog, spark: Any, tmp_path: Path, driver_reads: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches the driver read are decoded by the write's own job, batches read by the executors
    (``REPLICATOR_DRIVER_READ_OFFSETS`` 0) once and cached: the tables are the same."""
    monkeypatch.setenv("REPLICATOR_DRIVER_READ_OFFSETS", driver_reads)
    first = payments(600, seed=11)
    process(log, first)
    duck = open_sink(f"duckdb://{tmp_path}/mirror.duckdb", spark)
    delta = open_sink(f"delta://{tmp_path}/delta", spark)
    for sink in (duck, delta):
        engine = ReplayEngine(spark, log, sink)
        (result,) = engine.run(ReplayJob((TOPIC,)))
        assert result.mode == "rebuild" and result.table == "payments_per_customer"
        assert as_totals(sink.read("payments_per_customer").collect()) == expected_totals(first)

    # More input: the next replay catches up from each sink's ledger with MERGE.
    second = payments(300, seed=12)
    process(log, second)
    for sink in (duck, delta):
        reports: list[ReplayProgress] = []
        engine = ReplayEngine(spark, log, sink, progress=reports.append)
        (result,) = engine.run(
            ReplayJob((TOPIC,), start=Bound(BoundKind.LEDGER), batch_offsets=150)
        )
        assert result.mode == "catch-up" and len(result.entries) >= 2
        # a report before the first batch and after each: per-partition lag falls to zero
        assert len(reports) == len(result.entries) + 1
        assert reports[0].done == 0 and reports[0].total == result.span
        assert [r.done for r in reports] == sorted(r.done for r in reports)
        assert reports[-1].done == result.span and reports[-1].eta_seconds == 0
        assert sum(p.remaining for p in reports[0].partitions.values()) == result.span
        assert all(p.lag == 0 for p in reports[-1].partitions.values())
        assert reports[-1].lag_text() == "caught up"
        assert as_totals(sink.read("payments_per_customer").collect()) == expected_totals(
            first + second
        )
        # replaying again changes nothing: the ledger covers every offset
        (again,) = engine.run(ReplayJob((TOPIC,), start=Bound(BoundKind.LEDGER)))
        assert again.mode == "up-to-date"

    report = verify_tables(
        duck.read("payments_per_customer"), delta.read("payments_per_customer"), ["customer_id"]
    )
    assert report.equal, report.render()
    duck.close()
    delta.close()


@pytest.mark.parametrize("arrow_bytes", [2**30, 1], ids=["arrow", "parquet"])
def test_a_rebuild_bounds_its_write_by_the_live_images_it_decoded(
    log: LocalLog, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arrow_bytes: int
) -> None:
    """A full rebuild the cached way tells the sink how many rows it writes at most and how many
    bytes their values take: the keyed live images its compaction kept (its survey counts
    them), not the records it read. DuckDB stages them as Arrow within ``ARROW_BYTES``
    (whatever ``ARROW_ROWS``), else as Parquet files. (The one-job way, on a guess, stages as
    Arrow within ``ARROW_BYTES`` whatever the bounds: ``test_clean_guess``.)"""
    events = payments(600, seed=5)
    process(log, events)
    monkeypatch.setattr(duckdb_sink, "ARROW_ROWS", 0)
    monkeypatch.setattr(duckdb_sink, "ARROW_BYTES", arrow_bytes)
    bounds: list[dict[str, Any]] = []
    staged_as: list[bool] = []
    replace, staged = DuckDBSink.replace, DuckDBSink._staged

    def spied_replace(self: DuckDBSink, spec: Any, rows: Any, at: Any, **given: Any) -> Any:
        bounds.append(given)
        return replace(self, spec, rows, at, **given)

    def spied_staged(self: DuckDBSink, df: Any, fields: Any, arrow: bool) -> Any:
        staged_as.append(arrow)
        return staged(self, df, fields, arrow)

    monkeypatch.setattr(DuckDBSink, "replace", spied_replace)
    monkeypatch.setattr(DuckDBSink, "_staged", spied_staged)
    sink = DuckDBSink(tmp_path / "bounded.duckdb", spark)
    sink.guess_bytes = None  # the engine then takes the cached way
    (result,) = ReplayEngine(spark, log, sink).run(ReplayJob((TOPIC,)))
    assert result.mode == "rebuild" and result.span >= len(events)
    rows = sink.read(result.table).collect()
    assert as_totals(rows) == expected_totals(events)
    # As Arrow: each string's bytes and offset, 8 for the count, 16 for the decimal.
    sql = f"SELECT sum(strlen(customer_id) + strlen(__pos) + 8) FROM {result.table}"
    ((values,),) = duckdb_files.query(sink.path, sql)[1]
    assert bounds == [{"rows_at_most": len(rows), "bytes_at_most": values + 24 * len(rows)}]
    assert len(rows) < len(events) and staged_as == [arrow_bytes > 1]
    sink.close()


def test_a_catch_up_reads_the_ledger_once_before_it_writes(
    log: LocalLog, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan's ledger read serves the topic's run too (a --follow round opens the sink's
    file once fewer); what the round applies is the same."""
    first, second = payments(200, seed=15), payments(100, seed=16)
    process(log, first)
    sink = open_sink(f"duckdb://{tmp_path}/once.duckdb", spark)
    engine = ReplayEngine(spark, log, sink)
    engine.run(ReplayJob((TOPIC,)))
    process(log, second)
    reads: list[str] = []
    positions = sink.positions

    def counted(table: str) -> Any:
        reads.append(table)
        return positions(table)

    monkeypatch.setattr(sink, "positions", counted)
    (result,) = engine.run(ReplayJob((TOPIC,), start=Bound(BoundKind.LEDGER)))
    assert result.mode == "catch-up" and result.entries
    assert reads == ["payments_per_customer"]
    assert as_totals(sink.read("payments_per_customer").collect()) == expected_totals(
        first + second
    )
    sink.close()


def test_point_in_time_copy_leaves_the_live_table_alone(
    log: LocalLog, spark: Any, tmp_path: Path
) -> None:
    first, second = payments(200, seed=13), payments(200, seed=14)
    process(log, first)
    cut = {tp: log.bounds(tp.topic, tp.partition).end for tp in _changelog_partitions(log)}
    process(log, second)
    sink = open_sink(f"duckdb://{tmp_path}/pit.duckdb", spark)
    engine = ReplayEngine(spark, log, sink)
    engine.run(ReplayJob((TOPIC,)))
    (pit,) = engine.run(
        ReplayJob((TOPIC,), stop=Bound(BoundKind.OFFSETS, offsets=cut),
                  into={TOPIC: "payments_as_of_first"})
    )  # fmt: skip
    assert pit.table == "payments_as_of_first"
    assert as_totals(sink.read("payments_as_of_first").collect()) == expected_totals(first)
    assert as_totals(sink.read("payments_per_customer").collect()) == expected_totals(
        first + second
    )
    (entry,) = sink.history("payments_as_of_first")
    assert entry.positions == cut  # the offsets this copy reflects
    sink.close()


def _changelog_partitions(log: LocalLog) -> list[Any]:
    from cdc.streams.protocol import TopicPartition

    return [TopicPartition(TOPIC, p) for p in range(log.partition_count(TOPIC))]


@pytest.mark.parametrize("kind", ["duckdb", "delta"])
def test_a_lone_catch_up_batch_decoded_once_finds_its_truncates(
    spark: Any, tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catch-up of one batch decoded once (cached) finds its truncates in its own decode,
    not by a read of the stream ahead of it: the table still equals the fold of the input."""
    monkeypatch.setenv("REPLICATOR_DRIVER_READ_OFFSETS", "0")
    events = input_events(400, seed=21)
    assert any(e.get("reset") for e in events)
    changelog = build_changelog(f"local://{tmp_path}/log", "lone", events)
    suffix = ".duckdb" if kind == "duckdb" else ""
    layout = changelog.layout(f"{kind}://{tmp_path}/out{suffix}", batch_offsets=1_000_000)
    sink = open_sink(layout.sink, spark)
    found: list[object] = []

    def probe(*args: object) -> list[object]:
        found.append(args)
        return []

    monkeypatch.setattr("replay.tables.engine.find_truncates", probe)
    replay_to_end(spark, layout, sink)
    assert found == []  # the lone batch found them itself
    assert rows_of(sink, layout.table) == fold(events)
    sink.close()
