"""A first rebuild in one Spark job, on the guess that the topic is clean (``clean_guess``), on
both streams, into DuckDB and Delta: the table the cached way builds, with no cache, the rows
handed over in files or as a frame; the cached way wherever the guess fails (a truncate, a key in
two partitions, a bad record, rows past the memory bound), with nothing written by the failed
guess."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc.streams.protocol import EventStream
from replay.decode import clean_guess
from replay.sinks import duckdb_files
from replay.sinks.duckdb_sink import DuckDBSink
from replay.sinks.registry import open_sink
from replay.tables import engine
from replay.tables.engine import ReplayEngine, ReplayJob, TopicResult
from tests.replay.decode.conftest import Changelog, Written, account, comparable
from tests.replay.decode.test_compaction import _history, _other_partition

pytestmark = pytest.mark.integration
CACHED_WAY = "the cached way"


def _clean(log: Changelog | None = None) -> tuple[Changelog, dict[int, dict[str, Any]]]:
    """Creates, updates, deletes (with tombstones) and a key re-created, over three partitions
    (after what ``log`` holds): nothing the guess rules out."""
    log, table = log or Changelog(partitions=3), {}
    for i in range(1, 31):
        log.upsert(None, account(i, balance=Decimal(i) / 4))
        table[i] = account(i, balance=Decimal(i) / 4)
    for i in range(2, 31, 3):
        log.upsert(table[i], account(i, name=f"updated-{i}", active=False))
        table[i] = account(i, name=f"updated-{i}", active=False)
    for i in (5, 6, 7):
        log.delete(table.pop(i))
    log.upsert(None, account(6, name="re-created"))
    table[6] = account(6, name="re-created")
    return log, table


def _rebuilt(spark: Any, stream: EventStream, sink: Any, topic: str, **job: Any) -> Any:
    (result,) = ReplayEngine(spark, stream, sink).run(ReplayJob((topic,), **job))
    assert isinstance(result, TopicResult) and result.mode == "rebuild"
    return result


def _table(sink: DuckDBSink, table: str) -> list[dict[str, Any]]:
    return sorted((comparable(r) for r in sink.read(table).collect()), key=lambda r: r["id"])


def _column_types(sink: DuckDBSink, table: str) -> list[Any]:
    return duckdb_files.query(
        sink.path,
        "SELECT column_name, data_type FROM information_schema.columns"
        f" WHERE table_name = '{table}' ORDER BY ordinal_position",
    )[1]


def _positions(sink: DuckDBSink, table: str) -> list[Any]:
    rows = duckdb_files.query(sink.path, f'SELECT id, __pos FROM "{table}" ORDER BY id')[1]
    assert rows and all(pos for _, pos in rows)
    return rows


def _duckdb(spark: Any, path: Path) -> DuckDBSink:
    sink = open_sink(f"duckdb://{path}", spark)
    assert isinstance(sink, DuckDBSink)
    return sink


@pytest.mark.parametrize("handed", [True, False], ids=["files", "frame"])
def test_a_clean_topic_is_rebuilt_in_one_job_as_the_cached_way_rebuilds_it(
    spark: Any, written: Written, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handed: bool
) -> None:
    """The tasks' rows handed over in files (local mode) or as a frame (a cluster's way)."""
    monkeypatch.setattr(clean_guess, "in_local_files", lambda _: handed)
    log, table = _clean()
    stream = written(log)
    guessed, cached = _duckdb(spark, tmp_path / "g.duckdb"), _duckdb(spark, tmp_path / "c.duckdb")
    for thread in threading.enumerate():  # the session's head start (``start_python_workers``)
        if thread.name == "start-python-workers":
            thread.join()
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup())
    with monkeypatch.context() as patch:  # the cached way would fill a cache by its own job
        patch.setattr(engine, "persisted_decode", lambda *_: pytest.fail("the cached way ran"))
        result = _rebuilt(spark, stream, guessed, log.topic)
    assert len(set(tracker.getJobIdsForGroup()) - before) == 1
    cached.guess_bytes = None  # the engine then takes the cached way
    again = _rebuilt(spark, stream, cached, log.topic)
    assert _table(guessed, result.table) == [comparable(table[k]) for k in sorted(table)]
    assert _table(guessed, result.table) == _table(cached, again.table)
    assert _column_types(guessed, result.table) == _column_types(cached, again.table)
    # Each row's position as the tasks wrote it (the guess plans no JVM position), as the JVM's
    assert _positions(guessed, result.table) == _positions(cached, again.table)
    assert guessed.history(result.table)[0].positions == cached.history(again.table)[0].positions


@pytest.mark.parametrize("handed", [True, False], ids=["files", "frame"])
def test_delta_rebuilds_a_clean_topic_on_the_guess_as_the_cached_way_does(
    spark: Any, written: Written, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handed: bool
) -> None:
    """Delta holds the guessed rows in the driver, then writes them: no cache, the table (its
    schema and each row's ``__pos``) and ledger of the cached way."""
    monkeypatch.setattr(clean_guess, "in_local_files", lambda _: handed)
    log, table = _clean()
    stream = written(log)
    guessed, cached = (
        open_sink(f"delta://{tmp_path}/g", spark),
        open_sink(f"delta://{tmp_path}/c", spark),
    )
    with monkeypatch.context() as patch:
        patch.setattr(engine, "persisted_decode", lambda *_: pytest.fail("the cached way ran"))
        result = _rebuilt(spark, stream, guessed, log.topic)
    cached.guess_bytes = None
    again = _rebuilt(spark, stream, cached, log.topic)
    rows = [
        sorted(map(comparable, s.read(t).collect()), key=lambda r: r["id"])
        for s, t in ((guessed, result.table), (cached, again.table))
    ]
    assert rows[0] == rows[1] == [comparable(table[k]) for k in sorted(table)]
    assert guessed.read(result.table).schema == cached.read(again.table).schema
    files = [
        spark.read.format("delta").load(f"{tmp_path}/{d}/{result.table}").select("id", "__pos")
        for d in "gc"
    ]
    assert sorted(map(tuple, files[0].collect())) == sorted(map(tuple, files[1].collect()))
    assert guessed.history(result.table)[0].positions == cached.history(again.table)[0].positions


def _truncated() -> tuple[Changelog, dict[int, dict[str, Any]]]:
    """Four rows, a truncate of them, then the clean history."""
    log = Changelog(partitions=3)
    for i in range(1, 5):
        log.upsert(None, account(i))
    log.truncate([account(i) for i in range(1, 5)])
    return _clean(log)


def _repeated() -> tuple[Changelog, dict[int, dict[str, Any]]]:
    """The clean history, then a change of key 9 in a partition other than its own."""
    log, table = _clean()
    log.upsert(table[9], account(9, name="elsewhere"), partition=_other_partition(log, 9))
    table[9] = account(9, name="elsewhere")
    return log, table


@pytest.mark.parametrize("history", [_history, _truncated, _repeated])
def test_a_failed_guess_writes_nothing_and_the_cached_way_rebuilds(
    spark: Any, written: Written, tmp_path: Path, caplog: pytest.LogCaptureFixture,
    history: Callable[[], tuple[Changelog, dict[int, dict[str, Any]]]],
) -> None:  # fmt: skip
    """A truncate, or a key in two partitions (the compaction history has both), fails the
    guess; the cached way then rebuilds the table."""
    log, table = history()
    stream = written(log)
    sink = _duckdb(spark, tmp_path / "t.duckdb")
    with caplog.at_level(logging.INFO, logger="replay.decode.clean_guess"):
        result = _rebuilt(spark, stream, sink, log.topic)
    assert [r.getMessage() for r in caplog.records if CACHED_WAY in r.getMessage()] != []
    assert _table(sink, result.table) == [comparable(table[k]) for k in sorted(table)]
    assert len(sink.history(result.table)) == 1  # the cached way's write alone


def test_a_bad_record_fails_the_guess_and_is_dead_lettered(
    spark: Any, written: Written, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log, table = _clean()
    offset = log.append(1, b'{"id": 99}', b'{"payload": {"op": "c", "after": 7}}')
    stream = written(log)
    sink = _duckdb(spark, tmp_path / "b.duckdb")
    with caplog.at_level(logging.INFO, logger="replay.decode.clean_guess"):
        result = _rebuilt(spark, stream, sink, log.topic, on_error="dead-letter")
    assert any(CACHED_WAY in r.getMessage() for r in caplog.records)
    assert result.bad == 1
    letters = sink.read("_replicator_dead_letters").collect()
    assert [(r["partition"], r["offset"]) for r in letters] == [(1, offset)]
    assert _table(sink, result.table) == [comparable(table[k]) for k in sorted(table)]


def test_rows_past_the_memory_bound_are_rebuilt_the_cached_way(
    spark: Any, written: Written, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log, table = _clean()
    stream = written(log)
    sink = _duckdb(spark, tmp_path / "m.duckdb")
    sink.guess_bytes = 64  # (the tasks stop shipping rows past it, and tell)
    with caplog.at_level(logging.INFO, logger="replay.decode.clean_guess"):
        result = _rebuilt(spark, stream, sink, log.topic)
    assert any("would take over 64 bytes" in r.getMessage() for r in caplog.records)
    assert _table(sink, result.table) == [comparable(table[k]) for k in sorted(table)]
    assert len(sink.history(result.table)) == 1
