"""Kill -9 fault injection of the replay engine (see ``replay_crash_trials``): 2 seeded trials,
DuckDB on the local log and Delta on Kafka, so every stream and every sink. After every crash the
table holds exactly the reference at its ledger's newest positions; after the resume it equals an
uninterrupted run and the reference of the whole input. ``bench/replay_crash_trials.py`` runs
more trials, on all four pairs."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.streams.protocol import TopicPartition
from replay.decode.truncates import Truncate
from replay.reading.bounds import Bound, BoundKind
from replay.reading.plan import PartitionRange, ReplayPlan
from replay.sinks.protocol import Sink
from replay.sinks.registry import open_sink
from replay.tables.batches import cut_batches
from tests.replay.tables.crash_trials import ReplayWorkerPool, rows_of, run_trial
from tests.replay.tables.crash_worker import replay_to_end
from tests.replay.tables.trial_changelog import Changelog, changelog_factory, fold

EVENTS = 800
# About 5 catch-up batches over the ~970 offsets of the changelog: each batch is a few Spark
# jobs. A trial takes about a minute (mostly the killed workers' Spark start-up and cold JIT):
# the suite runs 1 on each stream and each sink (the other two pairs added 4 min to the suite),
# bench/replay_crash_trials.py runs as many as asked on all four pairs.
BATCH_OFFSETS = 240
TRIALS = {
    ("local", "duckdb"): 1,
    ("kafka", "delta"): 1,
}
if os.environ.get("REPLAY_CRASH_TRIALS"):  # e.g. 1 per stream and sink, while debugging
    TRIALS = dict.fromkeys(TRIALS, int(os.environ["REPLAY_CRASH_TRIALS"]))


def test_batches_never_split_a_truncate_across_partitions() -> None:
    """Bug found by the crash trials: batches cut by offset counts put partition 0's truncate in
    one batch and partition 1's in a later one, whose whole-table clear then deleted the rows
    partition 0 had written after its truncate (every key of partition 0 was lost)."""
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    ranges = (PartitionRange(tp0, 0, 100, 0, 100), PartitionRange(tp1, 0, 200, 0, 200))
    plan = ReplayPlan(ranges, (), Bound(BoundKind.LATEST))
    seq = f"{7:020d}"
    truncates = [
        Truncate(f"{seq}{0:010d}{30:020d}", tp0, 30),
        Truncate(f"{seq}{1:010d}{150:020d}", tp1, 150),
    ]
    batches = cut_batches(plan, 40, truncates)
    stops = [b.stop_positions for b in batches]
    # a boundary right before both truncates: partition 0 waits at 30 until partition 1 is at 150
    assert {tp0: 30, tp1: 150} in stops
    for batch in batches:
        holds = [r.start <= t.offset < r.stop for r, t in zip(batch.ranges, truncates, strict=True)]
        assert holds[0] == holds[1], stops
    assert stops[-1] == {tp0: 100, tp1: 200}
    assert all(b.span <= 40 for b in batches)


@pytest.fixture(scope="module")
def small_spark(spark: Any) -> Iterator[Any]:
    """The session's SparkSession with few shuffle partitions (tiny batches), restored after."""
    saved = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    yield spark
    spark.conf.set("spark.sql.shuffle.partitions", saved)


@pytest.fixture(scope="module")
def changelogs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Changelog]:
    """One changelog per stream kind, built on first use."""
    return changelog_factory(request, tmp_path_factory, "replay-crash", EVENTS, seed=4)


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReplayWorkerPool]:
    workers = ReplayWorkerPool(tmp_path_factory.mktemp("replay-crash-workers"))
    yield workers
    workers.close()


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(2400)
@pytest.mark.parametrize(("stream", "sink"), list(TRIALS), ids=[f"{a}-{b}" for a, b in TRIALS])
def test_kill_9_during_replay(
    stream: str,
    sink: str,
    small_spark: Any,
    changelogs: Callable[[str], Changelog],
    pool: ReplayWorkerPool,
    tmp_path: Path,
) -> None:
    log = changelogs(stream)
    layout = log.layout(f"{sink}://{tmp_path / 'uninterrupted'}", BATCH_OFFSETS)
    baseline: Sink = open_sink(layout.sink, small_spark)
    try:
        replay_to_end(small_spark, layout, baseline)
        assert rows_of(baseline, layout.table) == fold(log.events)
        history = baseline.history(layout.table)
        assert len(history) >= 4, "the catch-up should take at least 4 merge batches"
        if sink == "delta":  # Delta keeps every version: each ledger entry matches its data
            for entry in history:
                positions = {tp.partition: o for tp, o in entry.positions.items()}
                rows = baseline.read(layout.table, entry.version).collect()
                got = {r["customer_id"]: (r["payments"], r["total_amount"]) for r in rows}
                assert got == log.reference(positions), f"version {entry.version}"

        first = 1000 * (list(TRIALS).index((stream, sink)) + 1)
        results = [
            run_trial(small_spark, pool, log, layout, baseline, seed, tmp_path)
            for seed in range(first, first + TRIALS[stream, sink])
        ]
    finally:
        baseline.close()
    crashes = sum(r.crashes for r in results)
    print(
        f"{stream}/{sink}: {len(results)} trials, {crashes} crashes "
        f"({sum(r.mid_write for r in results)} inside a sink write; "
        f"{sum(r.fresh_sinks for r in results)} restarts on a fresh sink), "
        f"{sum(r.seconds for r in results):.0f}s"
    )
    # a trial whose worker ends before its kill lands starts over on a fresh sink
    assert all(r.crashes > 0 for r in results), (
        f"crashes per seed: {[(r.seed, r.crashes) for r in results]}"
    )
