"""Driver: full rebuild of one changelog by every contender, in one run, on one broker.

    .venv/bin/python -m bench.replay.run [--events 1000000] [--keys 100000] [--partitions 8]

Starts one broker (``LocalKafkaBroker``), produces the changelog once (``bench.replay.changelog``),
then runs each contender one at a time, each in its own process (fresh JVMs), sampling the
process tree's peak RSS and CPU (``bench.replay.procmon``). Before each, the machine settles
(``procmon.settle``: dirty pages flushed, CPUs idle for a second): the first contender after a
10 M produce otherwise paid for the topic's write-back (a rebuild 35 s against 30 s). Every
contender's final table is checked against the generator's summary (rows, sum of payments, sum
of amounts; Kafka Streams: rows). Writes ``bench/results/replay-<time>.json`` and prints a
markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.replay import peers
from bench.replay.changelog import TOPIC, Summary, check_templates, produce
from bench.replay.procmon import run_monitored, settle
from bench.replay.report import machine, markdown, versions
from bench.replay.spark_worker import local_copy
from cdc.runtime.broker import LocalKafkaBroker

ROOT = Path(__file__).resolve().parents[2]
CONTENDERS = (
    "raw-consume", "spark-read", "local-raw", "local-read", "ours-duckdb", "ours-delta",
    "ours-local-duckdb", "kafka-streams", "spark-merge", "naive-duckdb",
)  # fmt: skip
_WORKER = {"raw-consume": "kafka_worker", "naive-duckdb": "kafka_worker"}


def command(name: str, spec: dict[str, Any], work: Path, result: Path) -> list[str]:
    if name == "kafka-streams":
        state = work / "kafka-streams-state"
        return peers.kafka_streams_command(
            spec["bootstrap"], TOPIC, "bench-ktable", state, spec["ks_threads"], spec["ks_heap"]
        )
    spec_file = work / f"{name}{spec.get('tag', '')}.spec.json"
    spec_file.write_text(json.dumps(spec))
    module = f"bench.replay.{_WORKER.get(name, 'spark_worker')}"
    return [sys.executable, "-m", module, str(spec_file), str(result)]


def measure(name: str, args: argparse.Namespace, bootstrap: str, work: Path) -> dict[str, Any]:
    """A contender's run. Ours replays as ``replicator replay`` does, once in a process of its
    own (its JIT chosen for a one-shot replay); with ``--warm`` also in a long-lived session
    (another process), whose second rebuild is the warm figure."""
    spec = {
        "contender": name, "bootstrap": bootstrap, "work": str(work),
        "naive_records": args.naive_records, "merge_batch": args.merge_batch,
        "ks_threads": args.ks_threads, "ks_heap": args.ks_heap, "warm": False,
        "one_shot": name.startswith("ours-"),
    }  # fmt: skip
    result = measure_once(name, spec, work)
    if args.warm and name.startswith("ours-"):
        long_lived = {**spec, "warm": True, "one_shot": False, "tag": "-long-lived"}
        again = measure_once(name, long_lived, work)
        result.update({k: v for k, v in again.items() if k.startswith("warm_")})
        result["long_lived_first_seconds"] = again["seconds"]
    return result


def measure_once(name: str, spec: dict[str, Any], work: Path) -> dict[str, Any]:
    tag = spec.get("tag", "")
    result_file, log = work / f"{name}{tag}.result.json", work / f"{name}{tag}.log"
    cmd = command(name, spec, work, result_file)
    settled_s = settle()
    load = os.getloadavg()[0]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    usage = run_monitored(cmd, cwd=ROOT, env=env, log=log)
    if usage.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{name} exited {usage.returncode}:\n{tail}")
    if name == "kafka-streams":
        last = log.read_text().strip().splitlines()[-1]
        result: dict[str, Any] = json.loads(last)
        result["table"] = {"rows": result.pop("rows")}
    else:
        result = json.loads(result_file.read_text())
    return {**result, **asdict(usage), "loadavg_1m_before": load, "settled_s": settled_s}


def checked(result: dict[str, Any], summary: Summary) -> str:
    """The check: "ok", "subset (not checked)" or what differs from the generator's summary."""
    if result.get("subset"):
        return "subset (not checked)"
    table = result.get("table")
    if table is None:
        return "n/a"
    expected = {"rows": summary.rows, "payments": summary.payments, "cents": summary.cents}
    wrong = {k: (v, expected[k]) for k, v in table.items() if v != expected[k]}
    return "ok" if not wrong else f"DIFFERS (got, expected): {wrong}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="change events")
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS), choices=CONTENDERS)
    parser.add_argument("--naive-records", type=int, default=100_000, help="records the naive"
                        " loop applies (its rate is measured on this prefix)")  # fmt: skip
    parser.add_argument("--merge-batch", type=int, default=1_000_000,
                        help="maxOffsetsPerTrigger of the foreachBatch + MERGE recipe")  # fmt: skip
    parser.add_argument("--ks-threads", type=int, default=2)
    parser.add_argument("--ks-heap", default="2g")
    parser.add_argument("--broker-heap", default="2g")
    parser.add_argument("--work-dir", type=Path, default=None, help="default: a temp dir")
    parser.add_argument("--keep", action="store_true", help="keep the work dir")
    parser.add_argument(
        "--warm",
        action="store_true",
        help="ours: also a long-lived session"
        " (another process) rebuilding twice: its second is the warm figure",
    )
    args = parser.parse_args(argv)
    check_templates()
    if "kafka-streams" in args.contenders:
        peers.ensure_built()
    work = (args.work_dir or Path(tempfile.mkdtemp(prefix="bench-replay-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    broker = LocalKafkaBroker(work / "broker", heap=args.broker_heap)
    results: dict[str, dict[str, Any]] = {}
    try:
        bootstrap = broker.start()
        print(f"broker {bootstrap}; producing {args.events:,} events ...", flush=True)
        began = time.monotonic()
        summary = produce(bootstrap, args.events, args.keys, args.partitions)
        produce_s = time.monotonic() - began
        print(f"produced {summary.records:,} records in {produce_s:.1f} s: {summary}", flush=True)
        if any(n.startswith("local-") or n == "ours-local-duckdb" for n in args.contenders):
            began = time.monotonic()  # the local-log contenders read one copy, made here
            local_copy({"bootstrap": bootstrap, "work": str(work)})
            print(f"copied into a local log in {time.monotonic() - began:.1f} s", flush=True)
        for name in args.contenders:
            result = measure(name, args, bootstrap, work)
            result.setdefault("records", summary.records)
            result["events_per_s"] = result["records"] / result["seconds"]
            if "warm_seconds" in result:
                result["warm_events_per_s"] = result["records"] / result["warm_seconds"]
                if result["warm_table"] != result["table"]:
                    result["check"] = "the warm rebuild's table differs"
            result.setdefault("check", checked(result, summary))
            results[name] = result
            print(
                f"  {name:14} {result['records']:>11,} records {result['seconds']:8.2f} s "
                f"{result['events_per_s']:>11,.0f} ev/s  peak RSS {result['peak_rss_mb']:7,.0f} MB"
                f"  cpu {result['cpu_s']:7.1f} s  {result['check']}",
                flush=True,
            )
    finally:
        broker.stop()
        if not args.keep and args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    meta = {
        "events": args.events, "keys": args.keys, "partitions": args.partitions,
        "records": summary.records, "live_rows": summary.rows, "produce_s": produce_s,
        "naive_records": args.naive_records, "merge_batch": args.merge_batch,
        "ks_threads": args.ks_threads, "machine": machine(), "versions": versions(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }  # fmt: skip
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"replay-{args.events // 1000}k-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    print()
    print(markdown(meta, results))
    print(f"\nresults: {out.relative_to(ROOT)}")
    good = ("ok", "n/a", "subset (not checked)")
    return 0 if all(r["check"] in good for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
