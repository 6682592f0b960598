"""Kill -9 trial harness shared by the replay and projection crash trials: worker processes
that start a SparkSession, report progress on stdout and are SIGKILLed with their process group,
a pool that warms the next worker while one runs, and a trial's result."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TextIO

REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_FRESH_SINKS = 3
"""A trial whose first worker ends before its kill lands starts over on a fresh sink, at most
this many times (a trial without a crash tests nothing)."""


# -- the worker processes -------------------------------------------------------------------


class JsonLayout(Protocol):
    """What a worker is started with: a layout it reads as one JSON line from stdin."""

    def to_json(self) -> str: ...


class Worker:
    """A crash worker process running ``MODULE``; its stdout lines are collected by a thread."""

    MODULE: str
    """The worker's module, run as ``python -m``; set by each kind of worker."""

    def __init__(self, stderr: TextIO) -> None:
        self.lines: list[str] = []
        self.times: list[float] = []
        self.proc = subprocess.Popen(
            # faulthandler: a native crash (DuckDB, the JVM bridge) prints its Python stack
            [sys.executable, "-X", "faulthandler", "-m", self.MODULE],
            cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            text=True, start_new_session=True,
        )  # fmt: skip
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.times.append(time.monotonic())
            self.lines.append(line.strip())

    def write_gaps(self) -> list[float]:
        """Seconds between consecutive ``committed`` lines."""
        at = [
            t
            for t, line in zip(self.times, self.lines, strict=False)
            if line.startswith("committed")
        ]
        return [b - a for a, b in itertools.pairwise(at)]

    def count(self, prefix: str) -> int:
        return sum(line.startswith(prefix) for line in self.lines)

    def wait_for(self, prefix: str, count: int) -> bool:
        """Wait until ``count`` lines start with ``prefix``; False if the worker ended first.
        Gives up (a hung worker) after minutes per line: a loaded machine is slow."""
        timeout_s = 600 + 180 * count
        deadline = time.monotonic() + timeout_s
        while self.count(prefix) < count:
            if self.proc.poll() is not None:
                time.sleep(0.05)  # the reader thread's last lines
                return self.count(prefix) >= count
            assert time.monotonic() < deadline, f"no {count} x {prefix!r} in {timeout_s}s"
            time.sleep(0.01)
        return True

    def start(self, layout: JsonLayout) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(layout.to_json() + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        """SIGKILL the worker's process group: Python, its Spark JVM and Spark's Python workers
        die at once (the JVM must not finish a Delta commit after the driver is gone)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        deadline = time.monotonic() + 5
        while _group_alive(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs (zombies do not count: nobody may reap them)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


class WorkerPool:
    """Hands out workers whose SparkSession is up, and warms the next one meanwhile."""

    worker_type: type[Worker]

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started = 0
        self.gaps: list[float] = []
        self._next: Worker | None = None

    def _spawn(self) -> Worker:
        self.started += 1
        stderr = (self.log_dir / f"worker-{self.started}.stderr").open("w")
        return self.worker_type(stderr)

    def take(self) -> Worker:
        worker = self._next or self._spawn()
        self._next = self._spawn()
        assert worker.wait_for("ready", 1), f"worker did not start: {self.stderr_tail()}"
        return worker

    def kill_delay_s(self) -> float:
        """The longest random delay after a commit: 1.5 times the median write seen so far."""
        gaps = sorted(self.gaps)
        return 1.5 * gaps[len(gaps) // 2] if gaps else 3.0

    def stderr_tail(self) -> str:
        return (self.log_dir / f"worker-{self.started - 1}.stderr").read_text()[-3000:]

    def close(self) -> None:
        if self._next is not None:
            self._next.kill()
            self._next = None


# -- the trials -------------------------------------------------------------------------------


@dataclass
class TrialResult:
    seed: int
    crashes: int = 0
    mid_write: int = 0
    """Crashes that landed between a ``write`` and its ``committed`` line."""
    seconds: float = 0.0
    fresh_sinks: int = 0
    """Times the first worker ended before its kill landed and the trial started over."""

    def starts_over(self) -> bool:
        """Called when a worker ended before its kill landed: whether the trial starts over on a
        fresh sink (it has not crashed yet and has restarts left), counting the restart."""
        if self.crashes or self.fresh_sinks >= MAX_FRESH_SINKS:
            return False
        self.fresh_sinks += 1
        return True
