"""Driver: our EventProcessor against quixstreams on one local Kafka broker, side by side.

    .venv/bin/python -m bench.processor.run [--events 500000] [--customers 50000] [--repeat 3]

Starts one broker (``LocalKafkaBroker``), produces the input once (4 partitions), computes the
reference state, then for each repetition runs, one at a time in its own process (so each has
the whole machine but the broker): our processor with ``schemas_enable`` True and False, and a
quixstreams Application (in ``.venv-bench-quix``, created here if absent), each a throughput run
then a restore run from its changelog with the state directory deleted. Every run's final state
is checked against the reference. Medians, ratios and the machine go to
``bench/results/processor-vs-quix-<time>.json`` and a markdown table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.processor.report import summarize, table
from bench.processor.workload import Reference, compare, payment_events, reference_state
from cdc.runtime.broker import LocalKafkaBroker
from cdc.streams.registry import open_stream

ROOT = Path(__file__).resolve().parents[2]
QUIX_VENV = ROOT / ".venv-bench-quix"
QUIX_VERSION = "3.28.1"
TOPIC = "payments-in"
PARTITIONS = 4
SYSTEMS = ("ours-schemas", "ours-schemaless", "quix", "floor-bare", "floor-debezium")
FLOORS = ("floor-bare", "floor-debezium")
"""Bare loops with no framework (``floor_worker``): throughput only, no restore."""
BASELINES = ("base-schemas", "base-schemaless")
"""Our processor from another source tree (``--baseline-tree``): before/after in one run."""


def ensure_quix_venv() -> Path:
    """The python of ``.venv-bench-quix`` with quixstreams installed (created if absent)."""
    python = QUIX_VENV / "bin" / "python"
    probe = [str(python), "-c", "import quixstreams; print(quixstreams.__version__)"]
    if python.exists():
        found = subprocess.run(probe, capture_output=True, text=True, check=False)
        if found.returncode == 0 and found.stdout.strip() == QUIX_VERSION:
            return python
    print(f"creating {QUIX_VENV} with quixstreams=={QUIX_VERSION} ...", flush=True)
    subprocess.run(["python3", "-m", "venv", str(QUIX_VENV)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"quixstreams=={QUIX_VERSION}"], check=True
    )
    return python


def produce_input(bootstrap: str, events: int, customers: int, seed: int) -> None:
    """Write the input topic once, in transactions of 100k records."""
    stream = open_stream(f"kafka://{bootstrap}")
    stream.ensure_topic(TOPIC, PARTITIONS)
    writer = stream.writer("bench-feeder")
    batch = 0
    writer.begin()
    for key, value in payment_events(events, customers, seed):
        writer.send(TOPIC, key, value)
        batch += 1
        if batch == 100_000:
            writer.commit()
            writer.begin()
            batch = 0
    writer.commit()
    writer.close()
    stream.close()


def versions(quix_python: Path) -> dict[str, str]:
    def of(python: str, modules: str) -> dict[str, str]:
        code = (
            "import importlib.metadata as m, json, sys; "
            f"print(json.dumps({{n: m.version(n) for n in {modules!r}.split()}}))"
        )
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
        return dict(json.loads(out.stdout))

    ours = of(sys.executable, "cdc-replicator confluent-kafka rocksdict pydantic")
    quix = of(str(quix_python), "quixstreams confluent-kafka rocksdict orjson")
    jars = sorted(p.name for p in (ROOT / ".cache/jars/kafka-broker").glob("kafka_*.jar"))
    return {
        "python": platform.python_version(),
        **{f"ours:{k}": v for k, v in ours.items()},
        **{f"quix:{k}": v for k, v in quix.items()},
        "kafka broker": jars[0].removesuffix(".jar") if jars else "?",
    }


def machine() -> dict[str, Any]:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    model = next(
        (ln.split(":", 1)[1].strip() for ln in lscpu.splitlines() if ln.startswith("Model name")),
        "?",
    )
    nproc = subprocess.run(["nproc"], capture_output=True, text=True, check=False).stdout.strip()
    return {"nproc": int(nproc or 0), "cpu": model, "kernel": platform.release()}


class Bench:
    """Runs one measurement of one system in its own process and checks its final state."""

    def __init__(
        self, args: argparse.Namespace, bootstrap: str, work: Path, quix: Path, reference: Reference
    ) -> None:
        self.args, self.bootstrap, self.work, self.quix = args, bootstrap, work, quix
        self.reference = reference

    def spec(self, system: str, rep: int, mode: str) -> dict[str, Any]:
        name = f"bench-{system}-{rep}"
        state_dir = self.work / "state" / name
        return {
            "mode": mode,
            "bootstrap": self.bootstrap,
            "topic": TOPIC,
            "partitions": PARTITIONS,
            "events": self.args.events,
            "commit_max_events": self.args.commit_events,
            "commit_interval_s": self.args.commit_interval,
            "processor_id": name,
            "group": name,
            "store_dir": str(state_dir),
            "state_dir": str(state_dir),
            "schemas_enable": system.endswith("-schemas"),
            "level": system.removeprefix("floor-"),
        }

    def measure(self, system: str, rep: int, mode: str) -> dict[str, Any]:
        spec = self.spec(system, rep, mode)
        if mode == "restore":
            shutil.rmtree(spec["state_dir"])  # lose the local state: rebuild from the changelog
        spec_file = self.work / f"{spec['group']}-{mode}.spec.json"
        result_file = self.work / f"{spec['group']}-{mode}.result.json"
        spec_file.write_text(json.dumps(spec))
        cwd = ROOT
        if system == "quix":
            cmd = [str(self.quix), str(Path(__file__).with_name("quix_worker.py"))]
        elif system in FLOORS:
            cmd = [sys.executable, "-m", "bench.processor.floor_worker"]
        else:
            cmd = [sys.executable, "-m", "bench.processor.ours_worker"]
            if system.startswith("base-"):
                cwd = self.args.baseline_tree  # its cdc/ shadows the installed checkout
        load = os.getloadavg()[0]
        began = time.monotonic()
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        subprocess.run([*cmd, str(spec_file), str(result_file)], cwd=cwd, env=env, check=True)
        result: dict[str, Any] = json.loads(result_file.read_text())
        result["process_wall_s"] = time.monotonic() - began
        result["loadavg_1m_before"] = load
        cpu = result.get("measured_cpu_s") or 0.0
        result["events_per_cpu_s"] = result["events"] / cpu if cpu else 0.0
        problems = compare(self.reference, result.pop("state"))
        result["state_ok"] = not problems
        result["state_problems"] = problems
        print(
            f"  {system:16} {mode:8} rep {rep}: {result['events']:>9} events "
            f"{result['seconds']:7.2f} s {result['events_per_s']:9.0f} ev/s "
            f"rss {result['peak_rss_mb']:6.0f} MB state {problems or 'OK'}",
            flush=True,
        )
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=500_000)
    parser.add_argument("--customers", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--commit-events", type=int, default=5_000)
    parser.add_argument("--commit-interval", type=float, default=0.2)
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        default=None,
        help="a copy of the repository (cdc/ and bench/) to run as base-schemas/base-schemaless "
        "in the same run, e.g. the code before a performance change",
    )
    parser.add_argument("--work-dir", type=Path, default=None, help="default: a temp dir")
    parser.add_argument("--keep", action="store_true", help="keep the work dir")
    args = parser.parse_args(argv)
    if "quix" not in args.systems:
        parser.error("quix is the baseline: keep it in --systems")
    if args.baseline_tree is not None:
        args.baseline_tree = args.baseline_tree.resolve()
        args.systems = [*args.systems, *BASELINES]
    quix = ensure_quix_venv()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-processor-"))
    work.mkdir(parents=True, exist_ok=True)
    broker = LocalKafkaBroker(work / "broker", heap="1g")
    try:
        bootstrap = broker.start()
        print(f"broker {bootstrap}; producing {args.events:,} events ...", flush=True)
        began = time.monotonic()
        produce_input(bootstrap, args.events, args.customers, args.seed)
        print(f"produced in {time.monotonic() - began:.1f} s", flush=True)
        reference = reference_state(payment_events(args.events, args.customers, args.seed))
        bench = Bench(args, bootstrap, work, quix, reference)
        results: dict[str, dict[str, list[dict[str, Any]]]] = {
            s: {"process": [], "restore": []} for s in args.systems
        }
        for rep in range(args.repeat):
            turn = rep % len(args.systems)  # rotate who goes first
            order = args.systems[turn:] + args.systems[:turn]
            for system in order:
                for mode in ("process",) if system in FLOORS else ("process", "restore"):
                    results[system][mode].append(bench.measure(system, rep, mode))
    finally:
        broker.stop()
        if not args.keep and args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    meta = {
        "events": args.events,
        "customers": args.customers,
        "partitions": PARTITIONS,
        "repeat": args.repeat,
        "commit_events": args.commit_events,
        "commit_interval_s": args.commit_interval,
        "seed": args.seed,
        "baseline_tree": None if args.baseline_tree is None else str(args.baseline_tree),
        "machine": machine(),
        "versions": versions(quix),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    summary = summarize(results)
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"processor-vs-quix-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"meta": meta, "summary": summary, "runs": results}, indent=2))
    print()
    print(table(summary, meta))
    print(f"\nversions: {', '.join(f'{k} {v}' for k, v in meta['versions'].items())}")
    print(f"results: {out.relative_to(ROOT)}")
    ok = all(m["all_states_ok"] for s in summary.values() for m in s.values() if "runs" in m)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
