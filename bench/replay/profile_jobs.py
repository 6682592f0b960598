"""Where a full rebuild spends its time, per Spark job, on a cold and then a warm JVM.

    .venv/bin/python -m bench.replay.profile_jobs [--events 1000000] [--keys 100000] [--sink duckdb]
        [--stream kafka|local] [--cprofile] [--ab KEY=VALUE]

Starts a broker, produces the benchmark changelog (``bench.replay.changelog``), and runs the same
``ReplayEngine`` rebuild ``--runs`` times in one SparkSession, each into a fresh table. After each
run it prints the run's wall time and every Spark job it ran (start within the run, wall time,
its tasks' run, CPU and GC seconds, stages, tasks, call site), read from Spark's REST API; the
time in which no job ran is the driver's (plan, schema, sink load); the JVM's own work in the run
(``jvm:``, from its management beans): the JIT compilers' time (a cold JVM's main cost on two
cores) and the collectors'; ``--cprofile`` shows where
the driver's Python spends the first run. ``--ab KEY=VALUE`` sets a session conf in every other
run (the first runs without it), an A/B in one session and on one copy of the topic; ``--conf
KEY=VALUE`` starts the session with it (what it does to a first run).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import shutil
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.replay.changelog import TOPIC, declared_spec, produce
from bench.replay.spark_worker import local_copy
from cdc.runtime.broker import LocalKafkaBroker
from cdc.streams.registry import open_stream
from replay.sinks.registry import open_sink
from replay.spark import SparkSession, spark_session
from replay.tables.engine import ReplayEngine, ReplayJob


def _jobs(ui: str, app: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{ui}/api/v1/applications/{app}/jobs") as response:
        jobs: list[dict[str, Any]] = json.load(response)
    return sorted(jobs, key=lambda j: int(j["jobId"]))


def _stage_times(ui: str, app: str) -> dict[int, tuple[float, float, float]]:
    """Per stage id: its tasks' run time, CPU time and JVM GC time, in seconds."""
    with urllib.request.urlopen(f"{ui}/api/v1/applications/{app}/stages") as response:
        stages: list[dict[str, Any]] = json.load(response)
    out: dict[int, tuple[float, float, float]] = {}
    for st in stages:
        run, cpu, gc = out.get(int(st["stageId"]), (0.0, 0.0, 0.0))
        out[int(st["stageId"])] = (run + st.get("executorRunTime", 0) / 1e3,
                                   cpu + st.get("executorCpuTime", 0) / 1e9,
                                   gc + st.get("jvmGcTime", 0) / 1e3)  # fmt: skip
    return out


def _at(text: str) -> float:
    """A REST API time (UTC) as seconds since the epoch."""
    moment = datetime.strptime(text.removesuffix("GMT"), "%Y-%m-%dT%H:%M:%S.%f")
    return moment.replace(tzinfo=UTC).timestamp()


def _seconds(job: dict[str, Any]) -> float:
    if not job.get("completionTime"):
        return float("nan")
    return _at(job["completionTime"]) - _at(job["submissionTime"])


def _busy(jobs: list[dict[str, Any]]) -> float:
    """Seconds in which at least one of ``jobs`` ran (jobs of one query may overlap)."""
    spans = sorted((_at(j["submissionTime"]), _at(j["completionTime"])) for j in jobs
                   if j.get("completionTime"))  # fmt: skip
    busy, reach = 0.0, float("-inf")
    for begin, end in spans:
        busy += max(0.0, end - max(begin, reach))
        reach = max(reach, end)
    return busy


class JvmWork:
    """The driver JVM's JIT compilation time (summed over its compiler threads) and collection
    time, from its management beans."""

    def __init__(self, spark: SparkSession) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        factory = jvm.java.lang.management.ManagementFactory
        self._jit = factory.getCompilationMXBean()
        self._gcs = list(factory.getGarbageCollectorMXBeans())

    def seconds(self) -> tuple[float, float]:
        """(JIT s, GC s) since the JVM started."""
        jit = self._jit.getTotalCompilationTime() / 1e3
        return jit, sum(bean.getCollectionTime() for bean in self._gcs) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--sink", choices=("duckdb", "delta"), default="duckdb")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument(
        "--stream", choices=("kafka", "local"), default="kafka",
        help="rebuild from the broker or from a local log copy of the topic",
    )  # fmt: skip
    parser.add_argument(
        "--cprofile",
        action="store_true",
        help="profile the driver's Python in the first run (cumulative times, the 40 highest)",
    )
    parser.add_argument(
        "--ab", metavar="KEY=VALUE",
        help="a session conf set in runs 1, 3, 5, ... and unset in runs 0, 2, 4, ...",
    )  # fmt: skip
    parser.add_argument(
        "--conf", metavar="KEY=VALUE", action="append", default=[],
        help="a Spark conf the session starts with (repeatable): a setting's first-run cost",
    )  # fmt: skip
    args = parser.parse_args()
    ab_key, _, ab_value = (args.ab or "").partition("=")
    work = Path(tempfile.mkdtemp(prefix="bench-profile-jobs-"))
    broker = LocalKafkaBroker(work / "broker", heap="2g")
    try:
        bootstrap = broker.start()
        produce(bootstrap, args.events, args.keys, args.partitions)
        t0 = time.monotonic()
        confs = dict(c.partition("=")[::2] for c in args.conf)
        spark = spark_session(conf={"spark.ui.enabled": "true", **confs})
        jvm = JvmWork(spark)
        jit, gc = jvm.seconds()
        print(f"session start: {time.monotonic() - t0:.2f} s (jvm: JIT {jit:.1f} s, GC {gc:.1f} s)",
              flush=True)  # fmt: skip
        ui, app = spark.sparkContext.uiWebUrl or "", spark.sparkContext.applicationId
        stream_url = f"kafka://{bootstrap}"
        if args.stream == "local":
            stream_url = local_copy({"bootstrap": bootstrap, "work": str(work)})
        stream = open_stream(stream_url)
        for run in range(args.runs):
            suffix = ".duckdb" if args.sink == "duckdb" else ""
            sink = open_sink(f"{args.sink}://{work}/out{run}{suffix}", spark)
            seen = {j["jobId"] for j in _jobs(ui, app)}
            started, wall, (jit, gc) = time.monotonic(), time.time(), jvm.seconds()
            job = ReplayJob((TOPIC,), declared={TOPIC: declared_spec()})
            if ab_key:
                if run % 2:
                    spark.conf.set(ab_key, ab_value)
                else:
                    spark.conf.unset(ab_key)
            profiler = cProfile.Profile() if args.cprofile and run == 0 else None
            if profiler is not None:
                profiler.enable()
            (result,) = ReplayEngine(spark, stream, sink).run(job)
            took = time.monotonic() - started
            jit_after, gc_after = jvm.seconds()
            if profiler is not None:
                profiler.disable()
                pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
            jobs = [j for j in _jobs(ui, app) if j["jobId"] not in seen]
            in_jobs = _busy(jobs)
            label = f" [{args.ab if run % 2 else 'default'}]" if ab_key else ""
            print(f"run {run}{label}: {took:.1f} s ({result.mode}), {len(jobs)} Spark jobs "
                  f"busy {in_jobs:.1f} s, none running {took - in_jobs:.1f} s; jvm: JIT "
                  f"{jit_after - jit:.1f} s, GC {gc_after - gc:.1f} s")  # fmt: skip
            stage_times = _stage_times(ui, app)
            for j in jobs:
                run_s, cpu_s, gc_s = (sum(stage_times.get(int(i), (0.0, 0.0, 0.0))[n]
                                          for i in j["stageIds"]) for n in range(3))  # fmt: skip
                print(f"  job {j['jobId']:>4} at {_at(j['submissionTime']) - wall:6.2f} s"
                      f" {_seconds(j):6.2f} s  tasks' run {run_s:6.1f} s cpu {cpu_s:6.1f} s"
                      f" gc {gc_s:5.1f} s  stages {len(j['stageIds'])}"
                      f"  tasks {j['numTasks']:>4}  {j['name'][:90]}")  # fmt: skip
            sink.close()
        spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
