"""Kill -9 trials of partitioned processor members, more of them than the test suite runs.

Each run is the suite's group trial (``tests/cdc/processor/test_group_crashes.run_group_trials``)
with more kills: 2 or 3 members of one processor on the real broker (or the local log) process
payments while one of them is SIGKILLed at a seeded random moment per kill (while processing,
restoring or rebalancing), restarted at once or left down so its tasks move, paused past its
session timeout first (a zombie; Kafka only), its stores deleted now and then; at the end one
member owns every task, and its state tables, the committed changelog (one change event per
input event, in its input's partition) and the transaction metadata must equal the reference
computed from the input alone. Runs rotate over the shapes below with a new seed each; a failed
run is reported with its seed and the next one goes on. Exit status 1 if any failed.

    .venv/bin/python -m bench.processor.group_crash_trials --runs 6 --kills 12 [--streams local]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
import traceback
import uuid
from contextlib import ExitStack
from pathlib import Path

from cdc.runtime.broker import LocalKafkaBroker
from tests.cdc.processor.test_group_crashes import run_group_trials

# (members, standbys) per run, in turn; zombies (a pause every fourth kill from the third) on
# Kafka only, as in the suite.
SHAPES = [(["m0", "m1"], 0), (["m0", "m1", "m2"], 1), (["m0", "m1"], 1)]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--kills", type=int, default=12, help="kills per run")
    parser.add_argument("--streams", nargs="+", default=["kafka", "local"],
                        choices=["kafka", "local"])  # fmt: skip
    parser.add_argument("--first-seed", type=int, default=1_000)
    args = parser.parse_args(argv)
    started = time.monotonic()
    failures: list[str] = []
    kills = 0
    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="group-crash-")))
        urls = {}
        for stream in args.streams:
            broker = LocalKafkaBroker(root / "broker") if stream == "kafka" else None
            urls[stream] = (f"kafka://{stack.enter_context(broker).bootstrap_servers}" if broker
                  else f"local://{root / 'log'}")  # fmt: skip
        runs = itertools.product(SHAPES, args.streams)
        for i, ((members, standbys), stream) in zip(range(args.runs), itertools.cycle(runs)):
            seed = args.first_seed + i
            work = root / f"run-{i}"
            work.mkdir()
            label = f"run {i} ({stream}, {len(members)} members, {standbys} standbys, seed {seed})"
            began = time.monotonic()
            try:
                run_group_trials(
                    urls[stream], work, lambda prefix: f"{prefix}-{uuid.uuid4().hex[:8]}",
                    members=members, kills=args.kills, standbys=standbys,
                    pauses=stream == "kafka" and args.kills > 2, seed=seed,
                )  # fmt: skip
                kills += args.kills
                print(f"{label}: ok in {time.monotonic() - began:.0f}s", flush=True)
            except Exception:
                failures.append(label)
                print(f"{label}: FAILED\n{traceback.format_exc()}", flush=True)
    print(f"{args.runs - len(failures)} of {args.runs} runs equal to the reference "
          f"({kills} kills in them), {time.monotonic() - started:.0f}s")  # fmt: skip
    for label in failures:
        print(f"failed: {label}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
