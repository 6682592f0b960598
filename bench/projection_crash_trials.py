"""Kill -9 trials of the projection engine, more of them than the test suite runs.

Each trial maintains a SQL projection (COUNT, SUM, MIN, MAX per group, with a WHERE) of a
processor changelog (updates, deletes, truncates) into a fresh DuckDB or Delta sink in a worker
process, SIGKILLs it at a seeded random moment (1-3 times), checks that the projection equals the
plain-Python reference at its ledger's newest positions, resumes, and checks the result against
the reference of the whole input (``tests/replay/projection/crash_trials.py``). Trials alternate
between the sinks (and streams); a failed trial is reported with its seed and the run goes on.
Exit status 1 if any trial failed.

    .venv/bin/python -m bench.projection_crash_trials --trials 20 [--streams local kafka]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from cdc.runtime.broker import LocalKafkaBroker
from replay.spark import spark_session
from tests.replay.crash_workers import TrialResult
from tests.replay.projection.crash_trials import ProjectionWorkerPool, layout_of, run_trial
from tests.replay.tables.trial_changelog import build_changelog, input_events


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--sinks", nargs="+", default=["duckdb", "delta"])
    parser.add_argument("--streams", nargs="+", default=["local"], choices=["local", "kafka"])
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--batch-offsets", type=int, default=100)
    parser.add_argument("--first-seed", type=int, default=200_000)
    args = parser.parse_args(argv)

    started = time.monotonic()
    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="projection-crash-")))
        spark = spark_session(
            app_name="projection-crash-bench", conf={"spark.sql.shuffle.partitions": "2"}
        )
        pool = ProjectionWorkerPool(root)
        stack.callback(pool.close)
        events = input_events(args.events, seed=7)
        logs = {}
        for stream in args.streams:
            broker = LocalKafkaBroker(root / "broker") if stream == "kafka" else None
            url = (f"kafka://{stack.enter_context(broker).bootstrap_servers}" if broker
                  else f"local://{root / 'log'}")  # fmt: skip
            logs[stream] = build_changelog(url, f"projection-crash-{int(time.time())}", events)
        combos = list(itertools.product(args.streams, args.sinks))
        print(f"set up in {time.monotonic() - started:.0f}s; {args.trials} trials", flush=True)

        results: dict[tuple[str, str], list[TrialResult]] = {c: [] for c in combos}
        failures: list[str] = []
        for i in range(args.trials):
            stream, sink = combo = combos[i % len(combos)]
            seed = args.first_seed + i
            sink_dir = root / stream / "trials"
            sink_dir.mkdir(parents=True, exist_ok=True)
            layout = layout_of(logs[stream], f"{sink}://{sink_dir}", args.batch_offsets)
            try:
                result = run_trial(spark, pool, logs[stream], layout, seed, sink_dir)
                results[combo].append(result)
                status = f"{result.crashes} crash(es), {result.mid_write} mid-write"
                status += f", {result.seconds:.0f}s"
            except AssertionError as exc:
                failures.append(f"seed {seed} ({stream}/{sink}): {exc}")
                status = f"FAILED: {exc}"
            print(f"trial {i + 1}/{args.trials} seed {seed} {stream}/{sink}: {status}", flush=True)

    print("\n| stream | sink | trials | crashes | inside a sink write | s/trial | failed |")
    print("|---|---|---|---|---|---|---|")
    for (stream, sink), done in results.items():
        per = sum(r.seconds for r in done) / max(1, len(done))
        crashes, mid = sum(r.crashes for r in done), sum(r.mid_write for r in done)
        failed = sum(f"({stream}/{sink})" in f for f in failures)
        print(f"| {stream} | {sink} | {len(done)} | {crashes} | {mid} | {per:.1f} | {failed} |")
    print(f"\n{len(failures)} failed trial(s); {time.monotonic() - started:.0f}s in all")
    for failure in failures:
        print(f"  {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
