"""Readers of a live DuckDB read model: how stale their view is and how long they wait.

One run: a feeder writes change transactions to a change topic at ``--rate`` events/s for
``--seconds``; ``replicator replay --follow`` (or ``project --follow`` with ``--projection``)
keeps a DuckDB file live; ``--readers`` processes run the README's recipe
(``docs/examples/live_duckdb_reader.py``) every ``--every`` seconds. Reported:

* visibility: for each transaction, from its commit on the stream to the first read whose ledger
  covers it (p50, p99, max), i.e. how stale a reader's view can be;
* reader wait: time a read spent waiting for the writer's lock (p50, p99, max);
* reads made, states seen, and the machine.

    .venv/bin/python -m bench.live_readers --rate 1000 --seconds 60 --readers 2
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.replay.report import machine
from cdc.streams.local import LocalLog
from projections.change_ops import RowChange
from tests.replay.projection.workload import SalesTopic

ROOT = Path(__file__).resolve().parents[1]
READER = ROOT / "docs" / "examples" / "live_duckdb_reader.py"
PROJECTION = (
    "CREATE TABLE tickets_by_title AS SELECT title, count(*) AS sold, sum(seats) AS seats "
    "FROM movie_ticket_sales GROUP BY title"
)


def _row(i: int, seats: int) -> dict[str, Any]:
    return {"id": i, "title": f"t{i % 97}", "region": "eu", "total_ticket_value": None,
            "seats": seats, "refunded": False}  # fmt: skip


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """One measured run; the figures as a dict."""
    work = Path(tempfile.mkdtemp(prefix="live-readers-"))
    log = LocalLog(str(work / "log"))
    topic = SalesTopic(log, partitions=1)
    keys = args.keys
    topic.write(RowChange("c", None, _row(i, 1)) for i in range(keys))
    db, stop = work / "live.duckdb", work / "stop"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    table = "tickets_by_title" if args.projection else "movie_ticket_sales"
    command = (
        ["project", "--sql", PROJECTION, "--poll", "1"]
        if args.projection
        else ["replay", "--topics", topic.topic]
    )
    follower = subprocess.Popen(
        [sys.executable, "-m", "replay.cli.main", *command, "--follow",
         "--stream", f"local://{work}/log", "--sink", f"duckdb://{db}"],
        env=env, stdout=subprocess.DEVNULL, stderr=(work / "follower.err").open("w"),
    )  # fmt: skip
    outs = [work / f"reads-{n}.jsonl" for n in range(args.readers)]
    reader_cmd = [sys.executable, str(READER), str(db), table, "--every", str(args.every)]
    readers = [
        subprocess.Popen([*reader_cmd, "--stop-file", str(stop)], stdout=out.open("w"))
        for out in outs
    ]
    commits: list[tuple[int, float]] = []
    try:
        _wait(lambda: _reads(outs, table), follower, 300)
        per_txn = max(1, int(args.rate * args.interval))
        step, deadline = 0, time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            started = time.monotonic()
            first = step * per_txn  # the keys of this transaction, in turn
            changes = [RowChange("u", None, _row((first + n) % keys, step)) for n in range(per_txn)]
            topic.write(changes)
            commits.append((log.bounds(topic.topic, 0).end, time.time()))
            step += 1
            time.sleep(max(0.0, args.interval - (time.monotonic() - started)))
        final = commits[-1][0]
        _wait(lambda: _covered(outs, topic.topic, final), follower, 300)
    finally:
        stop.touch()
        for reader in readers:
            reader.wait(timeout=60)
        follower.send_signal(signal.SIGINT)
        try:
            follower.wait(timeout=60)
        except subprocess.TimeoutExpired:
            follower.kill()
    reads = [json.loads(line) for out in outs for line in out.read_text().splitlines()]
    return _figures(args, commits, reads, topic.topic, table)


def _reads(outs: list[Path], table: str) -> bool:
    return any(o.exists() and '"positions": {"' in o.read_text() for o in outs)


def _covered(outs: list[Path], topic: str, offset: int) -> bool:
    key = f"{topic}:0"
    for out in outs:
        for line in out.read_text().splitlines()[-5:]:
            if json.loads(line)["positions"].get(key, -1) >= offset:
                return True
    return False


def _wait(done: Any, follower: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if follower.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the follower stopped or stalled (exit {follower.poll()})")
        time.sleep(0.1)


def _figures(
    args: argparse.Namespace,
    commits: list[tuple[int, float]],
    reads: list[dict[str, Any]],
    topic: str,
    table: str,
) -> dict[str, Any]:
    key = f"{topic}:0"
    seen = sorted((r["t"], r["positions"].get(key, -1)) for r in reads if r["positions"])
    visible: list[float] = []
    for end, committed in commits:
        first = next((t for t, offset in seen if offset >= end and t >= committed), None)
        if first is not None:
            visible.append(first - committed)
    waits = [r["waited"] for r in reads]
    return {
        "table": table,
        "rate_events_s": args.rate,
        "seconds": args.seconds,
        "readers": args.readers,
        "read_every_s": args.every,
        "transactions": len(commits),
        "reads": len(reads),
        "states_seen": len({offset for _, offset in seen}),
        "visible_p50_s": round(_pct(visible, 0.5), 3),
        "visible_p99_s": round(_pct(visible, 0.99), 3),
        "visible_max_s": round(max(visible, default=float("nan")), 3),
        "wait_p50_ms": round(_pct(waits, 0.5) * 1000, 1),
        "wait_p99_ms": round(_pct(waits, 0.99) * 1000, 1),
        "wait_max_ms": round(max(waits, default=float("nan")) * 1000, 1),
        "machine": machine(),
    }


def main() -> None:
    """Run and print the figures (also to ``bench/results/live-readers-<time>.json``)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", type=int, default=1000, help="events/s written to the topic")
    p.add_argument("--interval", type=float, default=0.1, help="seconds between transactions")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--readers", type=int, default=2)
    p.add_argument("--every", type=float, default=0.2, help="seconds between a reader's reads")
    p.add_argument("--projection", action="store_true", help="project --follow, not replay")
    figures = run(p.parse_args())
    print(json.dumps(figures, indent=2))
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (results / f"live-readers-{stamp}.json").write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
