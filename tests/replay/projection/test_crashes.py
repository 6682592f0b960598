"""Kill -9 fault injection of the projection engine (see ``projection_crash_trials``): 2 seeded
trials, DuckDB on the local log and Delta on Kafka. After every crash the projection equals the
plain-Python reference at its ledger's newest positions; after the resume it equals the reference
of the whole input. ``bench/projection_crash_trials.py`` runs more trials."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc.streams.local import LocalLog
from projections import SqlProjection
from projections.change_ops import RowChange
from replay.projection.engine import ProjectionEngine, ProjectionJob
from replay.sinks.delta_projection import DeltaProjectionStore
from replay.sinks.registry import open_sink
from tests.replay.projection.crash_trials import ProjectionWorkerPool, layout_of, run_trial
from tests.replay.projection.workload import TOPIC, SalesTopic
from tests.replay.tables.trial_changelog import Changelog, changelog_factory

EVENTS = 300
BATCH_OFFSETS = {"duckdb": 80, "delta": 150}
"""About 5 and 3 batches over the ~400 offsets of the changelog (more where truncates cut them):
a Delta batch is ten commits and more, some seconds each."""
TRIALS = {"duckdb": 1, "delta": 1}
if os.environ.get("PROJECTION_CRASH_TRIALS"):  # more trials per sink, e.g. while debugging
    TRIALS = dict.fromkeys(TRIALS, int(os.environ["PROJECTION_CRASH_TRIALS"]))
STREAM = {"duckdb": "local", "delta": "kafka"}


@pytest.fixture(scope="module")
def small_spark(spark: Any) -> Iterator[Any]:
    """The session's SparkSession with few shuffle partitions (tiny batches), restored after."""
    saved = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    yield spark
    spark.conf.set("spark.sql.shuffle.partitions", saved)


def _sale(sale_id: int, title: str) -> dict[str, Any]:
    return {"id": sale_id, "title": title, "region": "eu", "total_ticket_value": Decimal("9.50"),
            "seats": 1, "refunded": False}  # fmt: skip


@pytest.mark.integration
def test_projection_batches_never_split_a_truncate_across_partitions(
    small_spark: Any, tmp_path: Path
) -> None:
    """Bug found by the crash trials: the projection engine cut batches by offset counts alone,
    so a partition whose truncate came early applied it, and the rows written after it, batches
    before the other partitions reached the same truncate, whose projection reset then deleted
    those rows."""
    log = LocalLog.from_url(f"local://{tmp_path}/log")
    topic = SalesTopic(log)
    sink = open_sink(f"duckdb://{tmp_path}/out.duckdb", small_spark)
    projection = SqlProjection.parse(
        "CREATE TABLE per_title AS SELECT title, COUNT(*) AS sales FROM movie_ticket_sales "
        "GROUP BY title"
    )
    engine = ProjectionEngine(small_spark, log, sink)
    try:
        topic.write([RowChange("c", None, _sale(99, "Zed"))])
        first = engine.run(ProjectionJob(projection, TOPIC, batch_offsets=8))
        assert len(first.entries) == 1  # a first build is one write; then batches
        sale = _sale(0, "Dune")  # six updates of one key: its partition's truncate comes late
        topic.write([RowChange("c", None, sale), RowChange("c", None, _sale(1, "Heat"))])
        for seats in range(2, 8):
            topic.write([RowChange("u", sale, {**sale, "seats": seats})])
        topic.write([RowChange("t", None, None)])
        after = [_sale(i, "Alien" if i % 2 else "Brazil") for i in range(10, 16)]
        topic.write([RowChange("c", None, row) for row in after])
        counts = [log.bounds(TOPIC, p).end for p in range(2)]
        assert max(counts) - min(counts) >= 6, f"the partitions' offsets {counts} are too close"
        result = engine.run(ProjectionJob(projection, TOPIC, batch_offsets=8))
        assert len(result.entries) >= 3, "the run should take several batches"
        plan, _ = engine.sql_plan(ProjectionJob(projection, TOPIC))
        rows = sorted(engine.store.query(plan.visible_sql(engine.store.dialect)))
        assert rows == [("Alien", 3), ("Brazil", 3)], (
            f"after the truncate only the 6 sales written after it count; batches ended at "
            f"{[{tp.partition: o for tp, o in e.positions.items()} for e in result.entries]}"
        )
    finally:
        topic.close()
        sink.close()
        log.close()


@pytest.mark.integration
def test_delta_projection_truncate_is_invisible_until_its_batch_commits(
    small_spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug found by the crash trials: a Delta batch with a truncate reset the projection's
    master in a commit of its own, before the batch's ledger commit; a crash between the two
    left readers an empty projection while the ledger still stated the positions before the
    batch (until the next run's recovery)."""
    log = LocalLog.from_url(f"local://{tmp_path}/log")
    topic = SalesTopic(log)
    sink = open_sink(f"delta://{tmp_path}/out", small_spark)
    projection = SqlProjection.parse(
        "CREATE TABLE per_title AS SELECT title, COUNT(*) AS sales FROM movie_ticket_sales "
        "GROUP BY title"
    )
    job = ProjectionJob(projection, TOPIC)
    engine = ProjectionEngine(small_spark, log, sink)

    def visible() -> list[Any]:
        plan, _ = engine.sql_plan(job)
        return sorted(engine.store.query(plan.visible_sql(engine.store.dialect), plan.tables))

    def crash(*args: Any) -> None:
        raise KeyboardInterrupt("killed before the master's ledger commit")

    try:
        topic.write([RowChange("c", None, _sale(i, "Dune" if i % 2 else "Heat")) for i in range(4)])
        engine.run(job)
        before = engine.store.positions(job.table)
        topic.write([RowChange("t", None, None), RowChange("c", None, _sale(9, "Alien"))])
        with monkeypatch.context() as patch:
            patch.setattr(DeltaProjectionStore, "_commit_master", crash)
            with pytest.raises(KeyboardInterrupt):
                engine.run(job)
        assert engine.store.positions(job.table) == before
        assert visible() == [("Dune", 2), ("Heat", 2)], f"not the rows at the ledger's {before}"
        engine.run(job)
        assert visible() == [("Alien", 1)]
    finally:
        topic.close()
        sink.close()
        log.close()


@pytest.fixture(scope="module")
def changelogs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Changelog]:
    """One changelog per stream kind, built on first use."""
    return changelog_factory(request, tmp_path_factory, "projection-crash", EVENTS, seed=7)


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProjectionWorkerPool]:
    workers = ProjectionWorkerPool(tmp_path_factory.mktemp("projection-crash-workers"))
    yield workers
    workers.close()


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(2400)
@pytest.mark.parametrize("sink", list(TRIALS))
def test_kill_9_during_projection(
    sink: str,
    small_spark: Any,
    changelogs: Callable[[str], Changelog],
    pool: ProjectionWorkerPool,
    tmp_path: Path,
) -> None:
    log = changelogs(STREAM[sink])
    layout = layout_of(log, f"{sink}://{tmp_path}", BATCH_OFFSETS[sink])
    first = 1000 * (list(TRIALS).index(sink) + 1)
    results = [
        run_trial(small_spark, pool, log, layout, seed, tmp_path)
        for seed in range(first, first + TRIALS[sink])
    ]
    crashes = sum(r.crashes for r in results)
    print(
        f"{STREAM[sink]}/{sink}: {len(results)} trials, {crashes} crashes "
        f"({sum(r.mid_write for r in results)} inside a sink write; "
        f"{sum(r.fresh_sinks for r in results)} restarts on a fresh sink), "
        f"{sum(r.seconds for r in results):.0f}s"
    )
    # a trial whose worker ends before its kill lands starts over on a fresh sink
    assert all(r.crashes > 0 for r in results), (
        f"crashes per seed: {[(r.seed, r.crashes) for r in results]}"
    )
