"""Kill -9 trials of the replay engine, more of them than the test suite runs.

Each trial replays a processor changelog (updates, deletes, truncates) into a fresh DuckDB or
Delta table in a worker process, SIGKILLs it at a seeded random moment (1-3 times), checks that
the table holds exactly the reference at its ledger's newest positions, resumes, and checks the
result against an uninterrupted run and the reference (``tests/replay/tables/crash_trials.py``).
Trials alternate between the sinks (and streams); a failed trial is reported with its seed and
the run goes on. Exit status 1 if any trial failed.

    .venv/bin/python -m bench.replay_crash_trials --trials 100 [--streams local kafka]
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
from replay.sinks.protocol import Sink
from replay.sinks.registry import open_sink
from replay.spark import spark_session
from tests.replay.crash_workers import TrialResult
from tests.replay.tables.crash_trials import ReplayWorkerPool, rows_of, run_trial
from tests.replay.tables.crash_worker import ReplayLayout, replay_to_end
from tests.replay.tables.trial_changelog import build_changelog, fold, input_events


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--sinks", nargs="+", default=["duckdb", "delta"])
    parser.add_argument("--streams", nargs="+", default=["local"], choices=["local", "kafka"])
    parser.add_argument("--events", type=int, default=800)
    parser.add_argument("--batch-offsets", type=int, default=120)
    parser.add_argument("--first-seed", type=int, default=100_000)
    args = parser.parse_args(argv)

    started = time.monotonic()
    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="replay-crash-")))
        conf = {"spark.sql.shuffle.partitions": "2"}
        spark = spark_session(app_name="replay-crash-bench", conf=conf)
        pool = ReplayWorkerPool(root)
        stack.callback(pool.close)
        events = input_events(args.events, seed=4)
        combos = list(itertools.product(args.streams, args.sinks))
        layouts: dict[tuple[str, str], tuple[ReplayLayout, Sink]] = {}
        logs = {}
        for stream in args.streams:
            broker = LocalKafkaBroker(root / "broker") if stream == "kafka" else None
            url = (f"kafka://{stack.enter_context(broker).bootstrap_servers}" if broker
                  else f"local://{root / 'log'}")  # fmt: skip
            logs[stream] = build_changelog(url, f"replay-crash-{int(time.time())}", events)
        for stream, sink in combos:
            layout = logs[stream].layout(
                f"{sink}://{root / stream / f'uninterrupted-{sink}'}", args.batch_offsets
            )
            baseline = open_sink(layout.sink, spark)
            stack.callback(baseline.close)
            replay_to_end(spark, layout, baseline)
            assert rows_of(baseline, layout.table) == fold(events), f"{stream}/{sink} baseline"
            layouts[stream, sink] = (layout, baseline)
        print(f"set up in {time.monotonic() - started:.0f}s; {args.trials} trials", flush=True)

        results: dict[tuple[str, str], list[TrialResult]] = {c: [] for c in combos}
        failures: list[str] = []
        for i in range(args.trials):
            combo = combos[i % len(combos)]
            seed = args.first_seed + i
            layout, baseline = layouts[combo]
            sink_dir = root / combo[0] / "trials"
            try:
                result = run_trial(spark, pool, logs[combo[0]], layout, baseline, seed, sink_dir)
                results[combo].append(result)
                status = f"{result.crashes} crash(es), {result.mid_write} mid-write"
            except AssertionError as exc:
                failures.append(f"seed {seed} ({combo[0]}/{combo[1]}): {exc}")
                status = f"FAILED: {exc}"
            name = f"{combo[0]}/{combo[1]}"
            print(f"trial {i + 1}/{args.trials} seed {seed} {name}: {status}", flush=True)

    print("\n| stream | sink | trials | crashes | inside a sink write | s/trial |")
    print("|---|---|---|---|---|---|")
    for (stream, sink), done in results.items():
        per = sum(r.seconds for r in done) / max(1, len(done))
        crashes, mid = sum(r.crashes for r in done), sum(r.mid_write for r in done)
        print(f"| {stream} | {sink} | {len(done)} | {crashes} | {mid} | {per:.1f} |")
    print(f"\n{len(failures)} failed trial(s); {time.monotonic() - started:.0f}s in all")
    for failure in failures:
        print(f"  {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
