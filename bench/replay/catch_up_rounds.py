"""Catch-up rounds of a schemaless changelog: seconds per round, the final table checked.

    .venv/bin/python -m bench.replay.catch_up_rounds [--round-events 60000] [--rounds 5]
        [--keys 20000] [--sink duckdb|delta] [--partitions 2] [--phases]

Starts a broker, produces ``--round-events * (--rounds + 1)`` events of the replay benchmark's
changelog (``bench.replay.changelog``: the processor's own change events without a schema,
~330 bytes each, every 50th a delete with its tombstone) over ``--keys`` keys, builds the table
from the first slice of every partition, then catches up one slice per round
(``ReplayEngine.run`` from the ledger to the slice's end offsets), as ``replay`` does after a
pause. Each key changes ``--round-events / --keys`` times per round. Prints each round's mode,
offsets and seconds as one JSON line, then checks the final table against the generator's
summary (rows, sum of payments, sum of amounts): a round that is fast but wrong fails the run.
``--phases`` prints after each round the time of each engine step (``bench.replay.round_phases``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from bench.replay.changelog import TOPIC, declared_spec, produce
from bench.replay.follow_latency import fresh_stream
from bench.replay.round_phases import PhaseTimers
from bench.replay.run import checked
from bench.replay.spark_worker import table_check
from cdc.streams.protocol import TopicPartition
from replay.reading.bounds import Bound, BoundKind
from replay.sinks.registry import open_sink
from replay.spark import spark_session
from replay.tables.engine import ReplayEngine, ReplayJob


def main() -> None:
    """Produce, build, catch up round by round, check."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round-events", type=int, default=60_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--sink", choices=("duckdb", "delta"), default="duckdb")
    parser.add_argument("--phases", action="store_true", help="time engine steps per round")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-catch-up-"))
    verdict = "not checked"
    try:
        with fresh_stream("kafka", work) as stream:
            bootstrap = stream.url.removeprefix("kafka://")
            events = args.round_events * (args.rounds + 1)
            summary = produce(bootstrap, events, args.keys, args.partitions)
            spark = spark_session()
            suffix = ".duckdb" if args.sink == "duckdb" else ""
            sink = open_sink(f"{args.sink}://{work}/out{suffix}", spark)
            engine = ReplayEngine(spark, stream, sink)
            phases = PhaseTimers() if args.phases else None
            if phases is not None:
                phases.install(spark)
            ends = [stream.bounds(TOPIC, p).end for p in range(args.partitions)]
            slices = args.rounds + 1
            table = ""
            for round_ in range(slices):
                stop = {
                    TopicPartition(TOPIC, p): ends[p] * (round_ + 1) // slices
                    for p in range(args.partitions)
                }
                job = ReplayJob(
                    (TOPIC,),
                    start=Bound(BoundKind.LEDGER if round_ else BoundKind.EARLIEST),
                    stop=Bound(BoundKind.OFFSETS, offsets=stop),
                    declared={TOPIC: declared_spec()},
                )
                if phases is not None:
                    phases.clear()
                started = time.monotonic()
                (result,) = engine.run(job)
                seconds = time.monotonic() - started
                table = result.table
                print(json.dumps({"round": round_, "mode": result.mode, "offsets": result.span,
                                  "seconds": round(seconds, 2)}), flush=True)  # fmt: skip
                if phases is not None:
                    phases.report(1)
            verdict = checked({"table": table_check(sink.read(table))}, summary)
            print(json.dumps({"check": verdict}), flush=True)
            sink.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if verdict != "ok":
        raise SystemExit(f"the final table differs from the generator's: {verdict}")


if __name__ == "__main__":
    main()
