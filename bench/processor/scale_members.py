"""The member processes of the scale-out benchmark: start them, collect their lines and results,
and the two measurements (throughput of N members; failover of a killed member)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.processor.run import ROOT, TOPIC
from bench.processor.workload import Reference, compare, payment_events, reference_state
from cdc.streams.protocol import EventStream
from cdc.streams.registry import open_stream


class Process:
    """One worker process; its stdout lines (JSON) are collected as they come."""

    def __init__(self, cmd: list[str], result: Path) -> None:
        self.result = result
        self.lines: list[dict[str, Any]] = []
        self.popen = subprocess.Popen(
            cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )  # fmt: skip
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            if line.startswith("{"):
                self.lines.append(json.loads(line))

    def wait(self) -> dict[str, Any]:
        code = self.popen.wait(timeout=1800)
        self._reader.join(timeout=5)
        if code != 0:
            raise RuntimeError(f"{self.popen.args!r} exited {code}")
        out: dict[str, Any] = json.loads(self.result.read_text())
        return out


class Member:
    """Starts members of ours (``member_worker``) or quixstreams instances (``quix_worker``)."""

    def __init__(
        self, args: argparse.Namespace, bootstrap: str, work: Path, quix: Path | None
    ) -> None:
        self.args, self.bootstrap, self.work, self.quix = args, bootstrap, work, quix

    def start(self, system: str, group: str, name: str, **extra: Any) -> Process:
        spec = {
            "mode": "process", "bootstrap": self.bootstrap, "topic": TOPIC,
            "events": self.args.events, "processor_id": group, "group": group, "member": name,
            "store_dir": str(self.work / "state" / group),
            "state_dir": str(self.work / "state" / group / name),
            "commit_max_events": 5_000, "commit_interval_s": 0.2, "standbys": 0,
            "session_timeout_s": self.args.session_timeout,
            "transaction_timeout_s": self.args.transaction_timeout,
            "stop": "idle", "idle_s": 5.0, **extra,
        }  # fmt: skip
        spec_file = self.work / f"{group}-{name}.spec.json"
        result = self.work / f"{group}-{name}.result.json"
        spec_file.write_text(json.dumps(spec))
        if system == "quix":
            assert self.quix is not None
            cmd = [str(self.quix), str(Path(__file__).with_name("quix_worker.py"))]
        else:
            cmd = [sys.executable, "-m", "bench.processor.member_worker"]
        return Process([*cmd, str(spec_file), str(result)], result)


def _merged_state(
    results: list[dict[str, Any]], stale_copies: bool
) -> tuple[dict[str, list[object]], list[str]]:
    """The union of the processes' rows. Ours dumps its active tasks only, so a key in two with
    different rows is a fault (the same row is not: a member that stopped first dumped its tasks,
    which another member, still idling, then took over from its changelog and dumped again); a
    quixstreams instance leaves the stores of partitions it gave up on disk, so there the newest
    copy (the higher count: counts only grow) wins."""
    state: dict[str, list[object]] = {}
    twice = []
    for result in results:
        for key, row in result["state"].items():
            if key in state and (stale_copies or state[key] != row):
                twice.append(key)
                if stale_copies and int(str(row[0])) < int(str(state[key][0])):
                    continue
            state[key] = row
    if stale_copies or not twice:
        return state, []
    return state, [f"{len(twice)} keys in two members' tasks"]


def throughput(
    member: Member, system: str, count: int, group: str, reference: Reference
) -> dict[str, Any]:
    """``count`` processes of ``system`` in one group over the whole input."""
    # A single quixstreams instance stops once it has seen every event; several stop when idle.
    extra = {"idle_s": 5.0} if count > 1 or system == "ours" else {"idle_s": 0}
    processes = [member.start(system, group, f"m{k}", **extra) for k in range(count)]
    results = [p.wait() for p in processes]
    state, twice = _merged_state(results, stale_copies=system == "quix")
    first = min(r["first"] for r in results if r.get("first") is not None)
    last = max(r["last_commit"] for r in results if r.get("last_commit") is not None)
    events = sum(int(r["events"]) for r in results)
    return {
        "system": system, "members": count, "events": events, "seconds": last - first,
        "events_per_s": events / (last - first),
        "members_cpu_s": sum(float(r["measured_cpu_s"]) for r in results),
        "peak_rss_mb": [round(float(r["peak_rss_mb"])) for r in results],
        "per_member_events": [int(r["events"]) for r in results],
        "state_problems": twice + compare(reference, state),
    }  # fmt: skip


def _wait_for(
    process: Process, test: Callable[[dict[str, Any]], bool], timeout_s: float = 600
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in reversed(process.lines):
            if test(line):
                return dict(line)
        time.sleep(0.05)
    raise TimeoutError(f"no line of {process.popen.args!r} matched within {timeout_s}s")


def failover(
    member: Member, standbys: int, group: str,
    events: int, customers: int, seed: int,
) -> dict[str, Any]:  # fmt: skip
    """A and B process the input; a feeder keeps writing; B is killed; A takes B's tasks over."""
    a = member.start("ours", group, "a", stop="signal", standbys=standbys)
    b = member.start("ours", group, "b", stop="signal", standbys=standbys)

    def total() -> int:
        return sum(
            max((int(ln["events"]) for ln in p.lines if ln["event"] == "progress"), default=0)
            for p in (a, b)
        )

    while total() < events:
        time.sleep(0.2)
    time.sleep(3.0)  # standbys apply the last of B's changelog
    b_tasks = set(_wait_for(b, lambda ln: ln["event"] == "progress")["tasks"])
    fed: list[tuple[bytes, bytes]] = []
    stop = threading.Event()
    feeder = threading.Thread(target=_feed, args=(member, fed, stop, customers, seed + 1))
    feeder.start()
    time.sleep(2.0)
    killed_at = time.time()
    b.popen.send_signal(signal.SIGKILL)
    b.popen.wait()
    took = _wait_for(
        a,
        lambda ln: (
            ln["event"] == "assigned" and ln["time"] > killed_at and b_tasks <= set(ln["tasks"])
        ),
    )
    committed = _wait_for(a, lambda ln: ln["event"] == "committed" and ln["time"] > took["time"])
    time.sleep(2.0)
    stop.set()
    feeder.join()
    stream = open_stream(f"kafka://{member.bootstrap}")  # every failover run fed the topic
    caught_up_s = _wait_caught_up(stream, group)
    a.popen.send_signal(signal.SIGTERM)
    result = a.wait()
    expected = reference_state(
        (r.key or b"", r.value or b"") for p in range(4) for r in stream.read(TOPIC, p, 0)
    )
    stream.close()
    return {
        "standbys": standbys, "b_tasks": sorted(b_tasks),
        "failover_s": took["time"] - killed_at, "takeover_s": took["seconds"],
        "restored": sum(took["restored"].values()), "fed_events": len(fed),
        "committed_s": committed["time"] - killed_at, "caught_up_after_feed_s": caught_up_s,
        "timeline": [  # A's lines after the kill but progress: when each began, how long
            {"event": ln["event"], "at_s": round(ln.get("began", ln["time"]) - killed_at, 3),
             "took_s": round(ln["time"] - ln.get("began", ln["time"]), 3)}
            for ln in a.lines if ln["event"] != "progress" and ln["time"] > killed_at
        ],
        "state_problems": compare(expected, result["state"]),
    }  # fmt: skip


def _wait_caught_up(stream: EventStream, group: str, timeout_s: float = 600) -> float:
    """Wait until the group's committed input positions reach the input's end (A has processed
    every event fed, taken-over backlog included); the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        positions = stream.committed_positions(group, TOPIC)
        # a position may stop short of the end by a transaction marker: no record left is it
        if all(next(iter(stream.read(TOPIC, p, positions.get(p, 0))), None) is None
               for p in range(4)):  # fmt: skip
            return time.monotonic() - started
        time.sleep(0.5)
    raise TimeoutError(f"group {group} did not process its input to the end in {timeout_s}s")


def _feed(
    member: Member, fed: list[tuple[bytes, bytes]], stop: threading.Event, customers: int, seed: int
) -> None:
    stream = open_stream(f"kafka://{member.bootstrap}")
    writer = stream.writer(f"failover-feeder-{seed}")
    source = payment_events(10**9, customers, seed)
    per_tick = max(1, member.args.feed_rate // 20)
    while not stop.is_set():
        writer.begin()
        for _ in range(per_tick):
            key, value = next(source)
            writer.send(TOPIC, key, value)
            fed.append((key, value))
        writer.commit()
        time.sleep(0.05)
    writer.close()
    stream.close()
