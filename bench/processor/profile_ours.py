"""Profile our side alone: one broker, the benchmark's input, then a throughput run and a
restore run of ``ours_worker`` under pyinstrument (``pip install pyinstrument`` into the venv;
it is a profiling aid, not a project dependency). Reports go to ``bench/results/profile-*``.

    .venv/bin/python -m bench.processor.profile_ours [--events 100000] [--schemaless]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.processor.run import ROOT, TOPIC, produce_input
from cdc.runtime.broker import LocalKafkaBroker


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--customers", type=int, default=50_000)
    parser.add_argument("--schemaless", action="store_true")
    parser.add_argument("--commit-events", type=int, default=5_000)
    parser.add_argument("--commit-interval", type=float, default=0.2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-profile-"))
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    broker = LocalKafkaBroker(work / "broker", heap="1g")
    try:
        bootstrap = broker.start()
        produce_input(bootstrap, args.events, args.customers, 7)
        for mode in ("process", "restore"):
            if mode == "restore":
                shutil.rmtree(work / "store")
            spec = {
                "mode": mode, "bootstrap": bootstrap, "topic": TOPIC, "events": args.events,
                "commit_max_events": args.commit_events,
                "commit_interval_s": args.commit_interval, "processor_id": "profiled",
                "store_dir": str(work / "store"), "schemas_enable": not args.schemaless,
            }  # fmt: skip
            (work / "spec.json").write_text(json.dumps(spec))
            report = out / f"profile-{mode}.txt"
            subprocess.run(
                [sys.executable, "-m", "pyinstrument", "-o", str(report), "-m",
                 "bench.processor.ours_worker", str(work / "spec.json"), str(work / "r.json")],
                cwd=ROOT, check=True,
            )  # fmt: skip
            result = json.loads((work / "r.json").read_text())
            result.pop("state")
            print(mode, result, f"profile: {report}", flush=True)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
