"""Scale-out benchmark: 1 and 2 members of our partitioned processor against 1 and 2 quixstreams
instances doing the same job, and the failover time of a killed member with and without a
standby, in one run on one local Kafka broker.

    .venv/bin/python -m bench.processor.scale_out [--events 1000000] [--customers 200000]

Throughput of a run with several processes: all their events / (last commit that included
events - first event handled), over every process (monotonic clock, one machine). Every run's
final state (the union of the members' tasks) is checked against the reference. CPU seconds of
the members and of the broker's JVM are reported beside it (2 cores on this machine kind: two
members and the broker share them). Failover: members A and B (with or without a standby of each
other's tasks) process the input, a feeder keeps writing, B is killed with SIGKILL; the time from
the kill until A has restored B's tasks and reads their input (its ``assigned`` line), the
restore alone, the time until A's first commit after that, and A's timeline are reported; A is
stopped once the group's committed positions reach the input's end, and its state is checked
against the whole input. Results go to ``bench/results/scale-out-<time>.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.processor.run import ROOT, ensure_quix_venv, machine, produce_input, versions
from bench.processor.scale_members import Member, failover, throughput
from bench.processor.workload import payment_events, reference_state
from cdc.runtime.broker import LocalKafkaBroker


def _broker_cpu_s(broker: LocalKafkaBroker) -> float:
    process = broker._process  # the JVM's CPU time from /proc
    if process is None:
        return 0.0
    fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0  # utime + stime, in clock ticks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--customers", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--session-timeout", type=float, default=3.0)
    parser.add_argument("--transaction-timeout", type=float, default=5.0)
    parser.add_argument("--feed-rate", type=int, default=2_000, help="events/s during failover")
    parser.add_argument("--skip-quix", action="store_true")
    parser.add_argument("--only", choices=("throughput", "failover"), help="one of the two parts")
    parser.add_argument("--work-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    quix = None if args.skip_quix else ensure_quix_venv()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    broker = LocalKafkaBroker(work / "broker", heap="1g")
    runs: list[dict[str, Any]] = []
    fails: list[dict[str, Any]] = []
    try:
        bootstrap = broker.start()
        print(f"broker {bootstrap}; producing {args.events:,} events ...", flush=True)
        produce_input(bootstrap, args.events, args.customers, args.seed)
        reference = reference_state(payment_events(args.events, args.customers, args.seed))
        member = Member(args, bootstrap, work, quix)
        systems = [("ours", 1), ("ours", 2)] + ([] if quix is None else [("quix", 1), ("quix", 2)])
        for rep in range(args.repeat if args.only != "failover" else 0):
            order = systems[rep % len(systems) :] + systems[: rep % len(systems)]
            for system, count in order:
                before = _broker_cpu_s(broker)
                run = throughput(member, system, count, f"{system}{count}-r{rep}", reference)
                run["broker_cpu_s"] = _broker_cpu_s(broker) - before
                runs.append(run)
                print(f"  {system}-{count} rep {rep}: {run['events']:,} events "
                      f"{run['seconds']:.2f} s {run['events_per_s']:,.0f} ev/s, members cpu "
                      f"{run['members_cpu_s']:.1f} s, broker cpu {run['broker_cpu_s']:.1f} s, "
                      f"state {run['state_problems'] or 'OK'}", flush=True)  # fmt: skip
        for standbys in (0, 1) if args.only != "throughput" else ():
            for rep in range(args.repeat):
                result = failover(member, standbys, f"fail{standbys}-r{rep}",
                                  args.events, args.customers, args.seed)  # fmt: skip
                fails.append(result)
                print(f"  failover standbys={standbys}: {result['failover_s']:.2f} s "
                      f"(restore {result['takeover_s']:.2f} s, {result['restored']:,} records; "
                      f"first commit after {result['committed_s']:.2f} s), "
                      f"state {result['state_problems'] or 'OK'}", flush=True)  # fmt: skip
    finally:
        broker.stop()
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    summary = summarize(runs, fails)
    meta = {
        "events": args.events, "customers": args.customers, "partitions": 4,
        "session_timeout_s": args.session_timeout,
        "transaction_timeout_s": args.transaction_timeout, "feed_rate": args.feed_rate,
        "machine": machine(), "versions": versions(quix) if quix else {},
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }  # fmt: skip
    out = ROOT / "bench" / "results" / f"scale-out-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"meta": meta, "summary": summary, "runs": runs, "failovers": fails},
                              indent=2, default=str))  # fmt: skip
    print(json.dumps(summary, indent=2))
    print(f"results: {out.relative_to(ROOT)}")
    ok = all(not r["state_problems"] for r in [*runs, *fails])
    return 0 if ok else 1


def summarize(runs: list[dict[str, Any]], fails: list[dict[str, Any]]) -> dict[str, Any]:
    """Median throughput per system and member count, the ratios the issue asks for."""

    def median(values: list[float]) -> float:
        return statistics.median(values) if values else 0.0

    by_kind: dict[str, list[float]] = {}
    for r in runs:
        by_kind.setdefault(f"{r['system']}-{r['members']}", []).append(r["events_per_s"])
    rate = {kind: median(values) for kind, values in by_kind.items()}
    out: dict[str, Any] = {"events_per_s": rate}
    if rate.get("ours-1"):
        out["ours 2 members / 1"] = rate.get("ours-2", 0.0) / rate["ours-1"]
    if rate.get("quix-1"):
        out["quix 2 instances / 1"] = rate.get("quix-2", 0.0) / rate["quix-1"]
        out["ours-1 / quix-1"] = rate.get("ours-1", 0.0) / rate["quix-1"]
    if rate.get("quix-2"):
        out["ours-2 / quix-2"] = rate.get("ours-2", 0.0) / rate["quix-2"]
    for standbys in (0, 1):
        mine = [f for f in fails if f["standbys"] == standbys]
        out[f"failover_s standbys={standbys}"] = median([f["failover_s"] for f in mine])
        out[f"takeover_restore_s standbys={standbys}"] = median([f["takeover_s"] for f in mine])
        out[f"first_commit_s standbys={standbys}"] = median([f["committed_s"] for f in mine])
    if out.get("failover_s standbys=1"):
        out["failover without / with standby"] = (
            out["failover_s standbys=0"] / out["failover_s standbys=1"]
        )
    if out.get("first_commit_s standbys=1"):
        out["first commit without / with standby"] = (
            out["first_commit_s standbys=0"] / out["first_commit_s standbys=1"]
        )
    if out.get("takeover_restore_s standbys=1"):
        out["restore without / with standby"] = (
            out["takeover_restore_s standbys=0"] / out["takeover_restore_s standbys=1"]
        )
    return out


if __name__ == "__main__":
    sys.exit(main())
