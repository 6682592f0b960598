"""Wall time, peak memory (whole process tree: the processor children and the Spark JVM
included) and CPU of ``replicator demo`` at its default sizes, plus the machine's load.

    .venv/bin/python -m bench.demo_usage [--out DIR] [demo arguments...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from bench.replay.procmon import run_monitored

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/tmp/replicator-demo-usage")
    args, demo_args = parser.parse_known_args()
    log = Path(args.out + ".log")
    load_before = os.getloadavg()
    cmd = [sys.executable, "-m", "replay.cli.main", "demo", "--out", args.out, *demo_args]
    usage = run_monitored(cmd, log=log)
    result = {
        "command": " ".join(cmd[2:]),
        "exit": usage.returncode,
        "wall_s": round(usage.wall_s, 1),
        "peak_rss_mb": round(usage.peak_rss_mb),
        "cpu_s": round(usage.cpu_s, 1),
        "load_before": [round(x, 1) for x in load_before],
        "load_after": [round(x, 1) for x in os.getloadavg()],
        "cores": os.cpu_count(),
        "log": str(log),
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"demo-usage-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return usage.returncode


if __name__ == "__main__":
    raise SystemExit(main())
