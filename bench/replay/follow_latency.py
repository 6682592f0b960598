"""Follow mode: from a change's commit on the stream to its being visible to readers of the sink.

    .venv/bin/python -m bench.replay.follow_latency [--rates 1000 10000] [--sinks duckdb delta]
        [--commands replay project] [--seconds 40] [--warm 15] [--stream kafka|local]
        [--conf KEY=VALUE ...]

Per (command, sink, rate), a fresh broker (``LocalKafkaBroker``) or local log with one topic of 2
partitions: a feeder writes the processor's change events (``SalesTopic``: updates over
``--keys`` rows) in one stream transaction every 0.1 s at ``rate`` events/s; ``replicator replay
--follow`` (or ``project --follow`` of a GROUP BY) keeps the sink live in a subprocess; an
observer reads what a reader would see: for DuckDB the README's reader recipe
(``docs/examples/live_duckdb_reader.py``, read-only connection, table and ledger in one read)
every 0.1 s, for Delta the newest commit's ledger in ``_delta_log`` every 0.05 s (a Delta reader
sees a commit once its file is there). A transaction's latency is the time from its commit to
the first observation whose ledger covers its offsets in both partitions; p50, p99 and max are
reported with the rate the feeder reached, and again for the transactions committed ``--warm``
seconds or more after feeding began (the follower's JVM still compiles its catch-up path in the
first rounds after the build: they take up to twice as long), with every round's time.
Writes ``bench/results/follow-latency-<time>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

from bench.live_readers import PROJECTION, _pct, _row, _wait
from bench.replay.report import machine
from cdc.runtime.broker import LocalKafkaBroker
from cdc.streams.protocol import EventStream, TopicPartition
from cdc.streams.registry import open_stream
from projections.change_ops import RowChange
from replay.sinks.delta_log import read_ledger
from tests.replay.projection.workload import SalesTopic

ROOT = Path(__file__).resolve().parents[2]
READER = ROOT / "docs" / "examples" / "live_duckdb_reader.py"
INTERVAL_S = 0.1

Observation = tuple[float, dict[str, int]]
"""(time.time() of the read, the positions its ledger reflects: ``topic:partition`` -> next)."""


def _follower(
    command: str, stream_url: str, sink_url: str, topic: str, work: Path, conf: list[str]
) -> Any:
    args = (
        ["project", "--sql", PROJECTION] if command == "project" else ["replay", "--topics", topic]
    )
    settings = [arg for setting in conf for arg in ("--conf", setting)]
    return subprocess.Popen(
        [sys.executable, "-m", "replay.cli.main", *args, "--follow", "--stream", stream_url,
         "--sink", sink_url, *settings],
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "400"}, stdout=subprocess.PIPE,
        stderr=(work / f"{command}.err").open("w"), text=True,
    )  # fmt: skip


def _round_ends(follower: Any, ends: list[float]) -> None:
    """The time of each round's result line (one line per round: one topic or one projection)."""
    for line in follower.stdout:
        if "offset span" in line:
            ends.append(time.time())


def _observe_delta(root: Path, seen: list[Observation], stop: threading.Event) -> None:
    while not stop.is_set():
        positions: dict[str, int] = {}
        for table_dir in root.glob("*/_delta_log"):
            for found in read_ledger(table_dir.parent.name, table_dir.parent, latest_only=True):
                for tp, offset in found.entry.positions.items():
                    key = f"{tp.topic}:{tp.partition}"
                    positions[key] = max(positions.get(key, -1), offset)
        seen.append((time.time(), positions))
        stop.wait(0.05)


def _observe_duckdb(db: Path, table: str, seen: list[Observation], stop: threading.Event) -> None:
    reader = subprocess.Popen(
        [sys.executable, str(READER), str(db), table, "--every", "0.1"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert reader.stdout is not None
    try:
        for line in reader.stdout:
            read = json.loads(line)
            seen.append((read["t"], read["positions"]))
            if stop.is_set():
                break
    finally:
        reader.terminate()
        reader.wait(timeout=30)


def measure(
    stream: EventStream, command: str, sink: str, rate: int, args: argparse.Namespace, work: Path
) -> dict[str, Any]:
    """One (command, sink, rate) measurement on a fresh topic."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"{command}-{sink}-{rate}-", dir=work))
    feeder = SalesTopic(stream, partitions=2)
    feeder.write(RowChange("c", None, _row(i, 1)) for i in range(args.keys))
    target = run_dir / ("live.duckdb" if sink == "duckdb" else "delta")
    follower = _follower(
        command, stream.url, f"{sink}://{target}", feeder.topic, run_dir, args.conf
    )
    seen: list[Observation] = []
    round_ends: list[float] = []
    threading.Thread(target=_round_ends, args=(follower, round_ends), daemon=True).start()
    stop = threading.Event()
    table = "tickets_by_title" if command == "project" else feeder.topic.rsplit(".", 1)[-1]
    observer = threading.Thread(
        target=_observe_duckdb if sink == "duckdb" else _observe_delta,
        args=(target, table, seen, stop) if sink == "duckdb" else (target, seen, stop),
        daemon=True,
    )
    observer.start()
    parts = [TopicPartition(feeder.topic, p) for p in range(2)]
    commits: list[tuple[dict[str, int], float]] = []
    try:
        _wait(lambda: any(s[1] for s in seen), follower, 600)  # the initial build is visible
        per_txn = max(1, int(rate * INTERVAL_S))
        step, started, deadline = 0, time.monotonic(), time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            began = time.monotonic()
            first = step * per_txn
            feeder.write(
                RowChange("u", None, _row((first + n) % args.keys, step)) for n in range(per_txn)
            )
            ends = {f"{tp.topic}:{tp.partition}": stream.bounds(*tp).end for tp in parts}
            commits.append((ends, time.time()))
            step += 1
            time.sleep(max(0.0, INTERVAL_S - (time.monotonic() - began)))
        fed_s = time.monotonic() - started
        final = commits[-1][0]
        _wait(lambda: bool(seen) and _covers(seen[-1][1], final), follower, 600)
    finally:
        stop.set()
        follower.send_signal(signal.SIGINT)
        try:
            follower.wait(timeout=60)
        except subprocess.TimeoutExpired:
            follower.kill()
        observer.join(timeout=30)
    timed = _latencies(commits, sorted(seen, key=lambda s: s[0]))
    latencies = [latency for _, latency in timed]
    fed_from = commits[0][1] if commits else 0.0
    warm = [latency for committed, latency in timed if committed >= fed_from + args.warm]
    rounds = [b - a for a, b in pairwise(round_ends) if a >= fed_from]
    return {
        "command": command, "sink": sink, "rate_events_s": rate,
        "fed_events_s": round(step * per_txn / fed_s), "transactions": len(commits),
        "observations": len(seen), "measured": len(latencies),
        "p50_s": round(_pct(latencies, 0.5), 3), "p99_s": round(_pct(latencies, 0.99), 3),
        "max_s": round(max(latencies, default=float("nan")), 3),
        "warm_after_s": args.warm, "warm_p50_s": round(_pct(warm, 0.5), 3),
        "warm_p99_s": round(_pct(warm, 0.99), 3),
        "rounds": len(rounds), "round_p50_s": round(_pct(rounds, 0.5), 3),
        "round_p99_s": round(_pct(rounds, 0.99), 3), "round_s": [round(r, 3) for r in rounds],
    }  # fmt: skip


def _covers(positions: dict[str, int], ends: dict[str, int]) -> bool:
    return all(positions.get(key, -1) >= end for key, end in ends.items())


def _latencies(
    commits: list[tuple[dict[str, int], float]], seen: list[Observation]
) -> list[tuple[float, float]]:
    """(commit time, latency) of every transaction a reader saw."""
    out = []
    for ends, committed in commits:
        first = next((t for t, pos in seen if t >= committed and _covers(pos, ends)), None)
        if first is not None:
            out.append((committed, first - committed))
    return out


@contextmanager
def fresh_stream(kind: str, home: Path) -> Iterator[EventStream]:
    """A stream on a fresh broker (``kafka``) or local log (``local``) under ``home``; closed,
    and the broker stopped, after."""
    broker = LocalKafkaBroker(home / "broker", heap="1g") if kind == "kafka" else None
    try:
        url = f"kafka://{broker.start()}" if broker is not None else f"local://{home}/log"
        stream = open_stream(url)
        try:
            yield stream
        finally:
            stream.close()
    finally:
        if broker is not None:
            broker.stop()


def _fresh_stream_measure(
    command: str, sink: str, rate: int, args: argparse.Namespace, work: Path
) -> dict[str, Any]:
    with fresh_stream(args.stream, Path(tempfile.mkdtemp(prefix="stream-", dir=work))) as stream:
        return measure(stream, command, sink, rate, args, work)


def main() -> None:
    """Run every (command, sink, rate) and print a markdown table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rates", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--sinks", nargs="+", default=["duckdb", "delta"], choices=["duckdb", "delta"])
    p.add_argument("--commands", nargs="+", default=["replay", "project"])
    p.add_argument("--seconds", type=float, default=40.0, help="feeding time per measurement")
    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--warm", type=float, default=15.0,
                   help="also report the transactions committed this long after feeding began "
                        "(the follower's JVM warmed up)")  # fmt: skip
    p.add_argument("--stream", choices=["kafka", "local"], default="kafka")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting for the follower (repeatable)")  # fmt: skip
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="follow-latency-"))
    results = []
    for command in args.commands:
        for sink in args.sinks:
            for rate in args.rates:
                results.append(_fresh_stream_measure(command, sink, rate, args, work))
                print(json.dumps(results[-1]), flush=True)
    print("\n| command | sink | rate (fed) events/s | transactions | p50 s | p99 s | max s "
          f"| after {args.warm:g} s: p50 s | p99 s | rounds: p50 s | p99 s |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['command']} | {r['sink']} | {r['rate_events_s']:,} ({r['fed_events_s']:,}) "
              f"| {r['transactions']} | {r['p50_s']} | {r['p99_s']} | {r['max_s']} "
              f"| {r['warm_p50_s']} | {r['warm_p99_s']} "
              f"| {r['round_p50_s']} | {r['round_p99_s']} |")  # fmt: skip
    out = ROOT / "bench" / "results" / f"follow-latency-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"stream": args.stream, "results": results, "machine": machine()}))
    print(f"\n{out}")


if __name__ == "__main__":
    main()
