"""Kill -9 trials of the replay engine, shared by the test suite and the benchmark.

A processor turns input events (payments, account closings that delete a customer's row, resets
that clear the table) into a changelog with updates, deletes and truncates. A trial replays that
changelog into a fresh DuckDB or Delta table in a worker process
(:mod:`tests.replay.tables.crash_worker`), SIGKILLs it at a seeded random moment (after k sink
writes plus a random delay: in Spark work, inside a sink write, between a Delta tombstone commit
and its table commit), checks what the crash left, sometimes resumes in another worker and kills
that too, then resumes in the calling process and checks the result.

After every crash: the ledger's positions only grow entry to entry (no batch recorded twice), a
Delta table has no commit past its newest ledger entry, and the table holds exactly the reference
at the ledger's newest positions: the input events folded in plain Python up to the input offset
whose change is the last one before those positions (per changelog partition, for the keys of
that partition). After the resume: the table equals the uninterrupted run (order-independent
checksum) and the reference of the whole input.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from replay.sinks import duckdb_files
from replay.sinks.delta_log import commit_versions
from replay.sinks.duckdb_sink import DuckDBSink
from replay.sinks.protocol import Sink
from replay.sinks.registry import open_sink, sink_path
from replay.spark import SparkSession
from replay.verify import verify_tables
from tests.replay.crash_workers import TrialResult, Worker, WorkerPool
from tests.replay.tables.crash_worker import ReplayLayout, replay_to_end
from tests.replay.tables.trial_changelog import Changelog, Totals, fold

KEY = ["customer_id"]


# -- the worker processes -------------------------------------------------------------------


class ReplayWorker(Worker):
    """A replay crash worker process (see :class:`Worker`)."""

    MODULE = "tests.replay.tables.crash_worker"


class ReplayWorkerPool(WorkerPool):
    """Hands out replay workers whose SparkSession is up (see :class:`WorkerPool`)."""

    worker_type = ReplayWorker


# -- the trials -------------------------------------------------------------------------------


def rows_of(sink: Sink, table: str) -> Totals:
    """The table's rows; a DuckDB table read with SQL, without a Spark job."""
    if isinstance(sink, DuckDBSink):
        sql = f"SELECT customer_id, payments, total_amount FROM {table}"
        return {r[0]: (r[1], r[2]) for r in duckdb_files.query(sink.path, sql)[1]}
    return {
        r["customer_id"]: (r["payments"], r["total_amount"]) for r in sink.read(table).collect()
    }


def writes_left(layout: ReplayLayout, positions: Mapping[int, int] | None) -> int:
    """How many sink writes a run from ``positions`` (None: no ledger) still makes."""
    per_partition = max(1, layout.batch_offsets // len(layout.end))
    start = positions if positions is not None else layout.prefix
    batches = max(math.ceil((layout.end[p] - start[p]) / per_partition) for p in layout.end)
    return batches + (positions is None)


def check_after_crash(
    spark: SparkSession, log: Changelog, layout: ReplayLayout, what: str
) -> dict[int, int] | None:
    """Assert the crash left the table exactly at its newest ledger entry; its positions."""
    sink = open_sink(layout.sink, spark)
    try:
        history = sink.history(layout.table)
        scheme, root = sink_path(layout.sink)
        versions = commit_versions(root / layout.table) if scheme == "delta" else []
        if not history:
            assert layout.table not in sink.tables() and not versions, f"{what}: data, no ledger"
            return None
        offsets = [[e.positions[tp] for tp in sorted(e.positions)] for e in history]
        for before, after in itertools.pairwise(offsets):
            assert before != after and all(a >= b for a, b in zip(after, before, strict=True)), (
                f"{what}: ledger positions {offsets} do not grow entry to entry"
            )
        newest = history[-1]
        if versions:
            assert versions[-1] == newest.version, (
                f"{what}: Delta commit {versions[-1]} past the ledger's {newest.version}"
            )
        positions = {tp.partition: o for tp, o in newest.positions.items()}
        expected = log.reference(positions)
        assert rows_of(sink, layout.table) == expected, (
            f"{what}: the table differs from the reference at the ledger's {positions}"
        )
        return positions
    finally:
        sink.close()


def run_trial(
    spark: SparkSession,
    pool: ReplayWorkerPool,
    log: Changelog,
    base: ReplayLayout,
    baseline: Sink,
    seed: int,
    sink_dir: Path,
) -> TrialResult:
    """One trial: 1-3 killed workers, then a resume in this process; assertion messages name
    the seed."""
    rng = random.Random(seed)
    started = time.monotonic()
    scheme = sink_path(base.sink)[0]
    layout = replace(base, sink=f"{scheme}://{sink_dir / f'trial-{seed}'}")
    result = TrialResult(seed)
    crashes = rng.choices((1, 2, 3), weights=(6, 3, 1))[0]
    positions: dict[int, int] | None = None
    crash = 0
    while crash < crashes:
        crash += 1
        left = writes_left(layout, positions)
        if left < 2:
            break
        worker = pool.take()
        commits = rng.randrange(0, left - 1)
        what = f"seed {seed}, crash {crash} (after {commits} writes)"
        try:
            worker.start(layout)
            if worker.wait_for("committed", commits):  # else it ended first: checked below
                time.sleep(rng.uniform(0, pool.kill_delay_s()))
            pool.gaps += worker.write_gaps()
            finished = worker.proc.poll() is not None
        finally:
            worker.kill()
        if finished:
            assert worker.count("done"), (
                f"{what}: worker failed, exit status {worker.proc.returncode}, "
                f"stdout {worker.lines[-6:]}, stderr: {pool.stderr_tail()}"
            )
            if result.starts_over():  # a trial that never crashed tests nothing
                layout = replace(layout, sink=f"{layout.sink}-again")
                crash -= 1
            continue
        result.crashes += 1
        result.mid_write += worker.count("write") > worker.count("committed")
        positions = check_after_crash(spark, log, layout, what)
    sink = open_sink(layout.sink, spark)
    try:
        # The resume in one batch (split only at truncates): the ledger's positions compose.
        whole = replace(layout, batch_offsets=sum(layout.end.values()))
        replay_to_end(spark, whole, sink)
        what = f"seed {seed}, after resuming"
        history = sink.history(layout.table)
        assert history[-1].positions == layout.positions(layout.end), what
        assert rows_of(sink, layout.table) == fold(log.events), f"{what}: not the reference"
        report = verify_tables(sink.read(layout.table), baseline.read(layout.table), KEY)
        assert report.equal, f"{what}: not the uninterrupted run: {report.render()}"
    finally:
        sink.close()
    check_after_crash(spark, log, layout, f"seed {seed}, final ledger")
    result.seconds = time.monotonic() - started
    return result
