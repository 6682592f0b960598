"""Kill -9 trials of the projection engine, shared by the test suite and the benchmark.

The workload is the replay crash trials' processor changelog (payments per customer, with
closings that delete a row and resets that truncate the table); the projection is
:data:`~tests.replay.projection.crash_worker.PROJECTION_SQL` (COUNT, SUM, MIN, MAX per tier,
with a WHERE). A trial maintains it into a fresh DuckDB or Delta sink in a worker process
(:mod:`tests.replay.projection.crash_worker`), SIGKILLs it at a seeded random moment (after k
batches plus a random delay: in Spark work, inside a sink write, between the Delta commits of a
batch), checks what the crash left, sometimes resumes in another worker and kills that too, then
resumes in the calling process and checks the result.

After every crash: the ledger's positions grow entry to entry (no batch recorded twice; a Delta
``RESTORE`` restates the entry it restores, counted once), and the projection as readers see it
equals :func:`tiers` of the source table folded in plain Python up to the ledger's newest
positions (``Changelog.reference``). After the resume: the ledger is at the changelog's end and
the projection equals :func:`tiers` of the whole input.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from replay.projection.store import projection_store
from replay.sinks import duckdb_files
from replay.sinks.delta_log import read_ledger
from replay.sinks.delta_sink import DeltaSink
from replay.sinks.duckdb_sink import DuckDBSink
from replay.sinks.protocol import Sink
from replay.sinks.registry import open_sink, sink_path
from replay.spark import SparkSession
from tests.replay.crash_workers import TrialResult, Worker, WorkerPool
from tests.replay.projection.crash_worker import (
    TABLE,
    ProjectionLayout,
    project_to_end,
    projection_plan,
)
from tests.replay.tables.trial_changelog import Changelog, Totals, fold

Tiers = dict[str, tuple[int, Decimal, Decimal, Decimal]]
"""Per tier: customers, their total, the smallest and the largest customer's total."""


def tiers(state: Totals) -> Tiers:
    """The projection of the source table ``state``, computed in plain Python."""
    out: Tiers = {}
    for payments, total in state.values():
        if total < 100:
            continue
        tier = "new" if payments < 4 else "regular" if payments < 8 else "loyal"
        n, s, low, high = out.get(tier, (0, Decimal(0), total, total))
        out[tier] = (n + 1, s + total, min(low, total), max(high, total))
    return out


def differences(got: Tiers, expected: Tiers) -> dict[str, tuple[Any, Any]]:
    """Per tier that differs: (the projection's row, the reference's)."""
    return {
        k: (got.get(k), expected.get(k))
        for k in sorted(got.keys() | expected.keys())
        if got.get(k) != expected.get(k)
    }


def layout_of(log: Changelog, sink: str, batch_offsets: int) -> ProjectionLayout:
    """The changelog's layout: the first build covers each partition up to its first change
    after the first reset (a truncate, at 40% of the input), the rest is applied in batches."""
    reset = next(i for i, event in enumerate(log.events) if event.get("reset"))
    prefix = {
        p: next(offset for offset, end in log.changes[p] if end > reset + 1) + 1 for p in log.end
    }
    return ProjectionLayout(log.stream, log.topic, sink, prefix, dict(log.end), batch_offsets)


# -- the worker processes -------------------------------------------------------------------


class ProjectionWorker(Worker):
    """A projection crash worker process (see :class:`Worker`)."""

    MODULE = "tests.replay.projection.crash_worker"

    def write_seconds(self) -> list[float]:
        """How long each sink write took (``write n`` to ``committed n``)."""
        at = {line: t for t, line in zip(self.times, self.lines, strict=False)}
        return [
            at[f"committed {n}"] - at[f"write {n}"] for n in range(1, self.count("committed") + 1)
        ]


class ProjectionWorkerPool(WorkerPool):
    """Hands out projection workers whose SparkSession is up (see :class:`WorkerPool`)."""

    worker_type = ProjectionWorker

    def __init__(self, log_dir: Path) -> None:
        super().__init__(log_dir)
        self.writes: list[float] = []

    def write_delay_s(self) -> float:
        """The longest random delay after a ``write`` line: 1.2 times the median write."""
        writes = sorted(self.writes)
        return 1.2 * writes[len(writes) // 2] if writes else 5.0


# -- the checks -----------------------------------------------------------------------------


def visible(sink: Sink) -> Tiers | None:
    """The projection's rows as readers see them; None if its table does not exist."""
    if isinstance(sink, DeltaSink):
        exists = (sink.root / TABLE / "_delta_log").is_dir()
    else:
        assert isinstance(sink, DuckDBSink)
        sql = "SELECT count(*) FROM information_schema.tables WHERE table_name = ?"
        # a worker killed before its first write leaves no file (the sink creates it on write)
        exists = (
            Path(sink.path).exists() and duckdb_files.query(sink.path, sql, [TABLE])[1][0][0] > 0
        )
    if not exists:
        return None
    store, plan = projection_store(sink), projection_plan()
    rows = store.query(plan.visible_sql(store.dialect), plan.tables)
    return {r[0]: (r[1], r[2], r[3], r[4]) for r in rows}


def ledger(sink: Sink) -> list[dict[int, int]]:
    """The positions of the projection's ledger entries, oldest first; a Delta ``RESTORE``
    commit, which restates the entry it restores (same metadata), is not a new entry."""
    if isinstance(sink, DeltaSink):
        entries = read_ledger(TABLE, sink.root / TABLE)
        distinct = [e.entry for e, before in zip(entries, [None, *entries], strict=False)
                    if before is None or e.metadata != before.metadata]  # fmt: skip
    else:
        distinct = list(sink.history(TABLE))
    return [{tp.partition: o for tp, o in e.positions.items()} for e in distinct]


def check(spark: SparkSession, log: Changelog, layout: ProjectionLayout, what: str) -> Any:
    """Assert the projection is exactly the reference at its ledger's newest positions; those
    positions (None: no ledger entry yet)."""
    sink = open_sink(layout.sink, spark)
    try:
        entries = ledger(sink)
        for before, after in itertools.pairwise(entries):
            assert before != after and all(after[p] >= o for p, o in before.items()), (
                f"{what}: ledger positions {entries} do not grow entry to entry"
            )
        got = visible(sink)
        if not entries:
            assert not got, f"{what}: rows {got} but no ledger entry"
            return None
        positions = entries[-1]
        expected = tiers(log.reference(positions))
        assert got == expected, (
            f"{what}: the projection differs from the reference at the ledger's {positions} "
            f"(tier: (projection, reference)): {differences(got or {}, expected)}"
        )
        return positions
    finally:
        sink.close()


# -- the trials -------------------------------------------------------------------------------


def batches_left(layout: ProjectionLayout, positions: dict[int, int] | None) -> int:
    """About how many writes a run from ``positions`` (None: no ledger, the first build to
    come) still makes."""
    per_partition = max(1, layout.batch_offsets // len(layout.end))
    start = positions or layout.prefix
    batches = max(math.ceil((layout.end[p] - start[p]) / per_partition) for p in layout.end)
    return batches + (not positions)


def run_trial(
    spark: SparkSession,
    pool: ProjectionWorkerPool,
    log: Changelog,
    base: ProjectionLayout,
    seed: int,
    sink_dir: Path,
) -> TrialResult:
    """One trial: 1-3 killed workers, then a resume in this process; assertion messages name
    the seed."""
    rng = random.Random(seed)
    started = time.monotonic()
    scheme = sink_path(base.sink)[0]
    suffix = ".duckdb" if scheme == "duckdb" else ""
    layout = replace(base, sink=f"{scheme}://{sink_dir}/t{seed}{suffix}")
    result = TrialResult(seed)
    positions: dict[int, int] | None = None
    crashes = rng.choices((1, 2, 3), weights=(6, 3, 1))[0]
    crash = 0
    while crash < crashes:
        crash += 1
        left = batches_left(layout, positions)
        if left < 2:
            break
        worker = pool.take()
        assert isinstance(worker, ProjectionWorker)
        commits = rng.randrange(0, left - 1)
        # half the kills aim at the sink write of batch commits + 1, half anywhere after batch
        # commits (planning, reading and decoding in Spark, the write)
        line, most = rng.choice(
            [("write", pool.write_delay_s()), ("committed", pool.kill_delay_s())]
        )
        count, delay = commits + (line == "write"), rng.uniform(0, most)
        what = f"seed {seed}, crash {crash} ({delay:.1f}s after '{line} {count}')"
        try:
            worker.start(layout)
            if worker.wait_for(line, count):  # else it ended first: checked below
                time.sleep(delay)
            pool.gaps += worker.write_gaps()
            pool.writes += worker.write_seconds()
            finished = worker.proc.poll() is not None
        finally:
            worker.kill()
        if finished:
            assert worker.count("done"), (
                f"{what}: worker failed, exit status {worker.proc.returncode}, "
                f"stdout {worker.lines[-6:]}, stderr: {pool.stderr_tail()}"
            )
            if result.starts_over():  # a trial that never crashed tests nothing
                fresh = f"t{seed}-{result.fresh_sinks}{suffix}"
                layout = replace(layout, sink=f"{scheme}://{sink_dir}/{fresh}")
                crash -= 1
            continue
        result.crashes += 1
        result.mid_write += worker.count("write") > worker.count("committed")
        positions = check(spark, log, layout, what)
    sink = open_sink(layout.sink, spark)
    try:  # the resume in one batch (split only at truncates): the ledger's positions compose
        project_to_end(spark, replace(layout, batch_offsets=10**6), sink)
    finally:
        sink.close()
    end = check(spark, log, layout, f"seed {seed}, after resuming")
    assert end == log.end, f"seed {seed}: resumed to {end}, not the changelog's end {log.end}"
    assert tiers(log.reference(end)) == tiers(fold(log.events)), "the reference itself"
    result.seconds = time.monotonic() - started
    return result
