"""Where a ``--follow`` round spends its time, per Spark job and per phase of the engine.

    .venv/bin/python -m bench.replay.profile_rounds [--sink duckdb|delta] [--changes 1000]
        [--rounds 8] [--keys 10000] [--stream kafka|local] [--command replay|project]
        [--cprofile | --phases] [--conf KEY=VALUE ...]

Starts a broker (or a local log), writes ``--keys`` rows of the follow benchmark's table
(``SalesTopic``, 2 partitions), builds the table, then runs ``--rounds`` rounds as ``replay
--follow`` does: ``--changes`` updates written in transactions of 100, then one catch-up
(``ReplayEngine.run`` from the ledger; with ``--command project``, one round of ``project
--follow`` of the follow benchmark's GROUP BY projection). Per round it prints the wall time,
the Spark jobs (from the REST API: wall time, tasks, call site) and the time outside them (the
driver's).
``--phases`` then prints the mean wall time per round of each engine step from round 2 on
(``bench.replay.round_phases``); ``--cprofile`` the driver's cProfile from round 2 on.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.live_readers import PROJECTION, _row
from bench.replay.follow_latency import fresh_stream
from bench.replay.profile_jobs import _jobs, _seconds, _stage_times
from bench.replay.round_phases import PhaseTimers
from cdc.streams.protocol import EventStream
from projections import SqlProjection
from projections.change_ops import RowChange
from replay.projection.engine import ProjectionEngine, ProjectionJob
from replay.projection.versions import ProjectionVersions
from replay.reading.bounds import Bound, BoundKind
from replay.sinks.protocol import Sink
from replay.sinks.registry import open_sink
from replay.spark import SparkSession, spark_session
from replay.tables.engine import ReplayEngine, ReplayJob
from tests.replay.projection.workload import SalesTopic


def main() -> None:
    """Build, then time the rounds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sink", choices=("duckdb", "delta"), default="duckdb")
    parser.add_argument("--changes", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--stream", choices=("kafka", "local"), default="kafka")
    parser.add_argument("--command", choices=("replay", "project"), default="replay")
    parser.add_argument("--cprofile", action="store_true", help="profile the driver from round 2")
    parser.add_argument("--phases", action="store_true", help="time engine steps from round 2")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for the session (repeatable)")  # fmt: skip
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-profile-rounds-"))
    try:
        with fresh_stream(args.stream, work) as stream:
            _profile(stream, args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _profile(stream: EventStream, args: argparse.Namespace, work: Path) -> None:
    feeder = SalesTopic(stream, partitions=2)
    feeder.write(RowChange("c", None, _row(i, 1)) for i in range(args.keys))
    extra = dict(c.split("=", 1) for c in args.conf)
    spark = spark_session(conf={"spark.ui.enabled": "true", **extra})
    ui, app = spark.sparkContext.uiWebUrl or "", spark.sparkContext.applicationId
    suffix = ".duckdb" if args.sink == "duckdb" else ""
    sink = open_sink(f"{args.sink}://{work}/out{suffix}", spark)
    run_round = _rounds(args.command, spark, stream, sink, feeder.topic)
    profiler = cProfile.Profile() if args.cprofile else None
    phases = PhaseTimers() if args.phases else None
    if phases is not None:
        phases.install(spark)
    for round_ in range(args.rounds + 1):
        if round_:
            for first in range(0, args.changes, 100):
                count = min(100, args.changes - first)
                feeder.write(
                    RowChange("u", None, _row((round_ * args.changes + first + n) % args.keys,
                                              round_))
                    for n in range(count)
                )  # fmt: skip
        seen = {j["jobId"] for j in _jobs(ui, app)}
        compiled = _compiled(spark)
        started = time.monotonic()
        if round_ >= 2 and profiler is not None:
            profiler.enable()
        if round_ == 2 and phases is not None:
            phases.clear()
        mode, span = run_round()
        if profiler is not None:
            profiler.disable()
        took = time.monotonic() - started
        jobs = [j for j in _jobs(ui, app) if j["jobId"] not in seen]
        in_jobs = sum(_seconds(j) for j in jobs)
        print(f"round {round_}: {took:.2f} s ({mode}, span {span}), "
              f"{len(jobs)} Spark jobs {in_jobs:.2f} s, "
              f"outside them {took - in_jobs:.2f} s; {_compiled(spark) - compiled} "
              "classes generated")  # fmt: skip
        stage_times = _stage_times(ui, app)
        for j in jobs:
            run, cpu = (sum(stage_times.get(i, (0.0, 0.0, 0.0))[n] for i in j["stageIds"])
                        for n in range(2))  # fmt: skip
            print(f"  job {j['jobId']:>4} {_seconds(j):6.2f} s  tasks {j['numTasks']:>4}"
                  f"  run {run:5.2f} s  cpu {cpu:5.2f} s"
                  f"  {(j.get('description') or j['name'])[:80]}")  # fmt: skip
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(60)
    if phases is not None:
        print(f"engine steps, mean of rounds 2-{args.rounds} (nested steps count in both):")
        phases.report(args.rounds - 1)
    sink.close()
    spark.stop()


def _compiled(spark: SparkSession) -> int:
    """How many classes Spark's code generation has compiled (Janino) in this JVM."""
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[union-attr]
    return int(metrics.METRIC_COMPILATION_TIME().getCount())


def _rounds(
    command: str, spark: SparkSession, stream: EventStream, sink: Sink, topic: str
) -> Callable[[], tuple[str, int]]:
    """One round of ``command --follow`` per call: (its mode, the offsets it applied)."""
    if command == "project":
        projection = ProjectionVersions(ProjectionEngine(spark, stream, sink), "tickets_by_title")
        job = ProjectionJob(SqlProjection.parse(PROJECTION), topic)

        def project() -> tuple[str, int]:
            result = projection.serve(job)
            return result.mode, result.span

        return project
    engine = ReplayEngine(spark, stream, sink)
    jobs = [ReplayJob((topic,))]

    def replay() -> tuple[str, int]:
        (result,) = engine.run(jobs[-1])
        jobs.append(ReplayJob((topic,), start=Bound(BoundKind.LEDGER)))
        return result.mode, result.span

    return replay


if __name__ == "__main__":
    main()
