"""Run a command and sample its whole process tree: peak RSS (JVM children included) and CPU.

psutil is not in the project venv, so the tree is read from ``/proc`` every ``interval`` seconds:
the RSS of the root and every descendant summed (peak of the sums), and the CPU seconds of the
tree (live processes' utime+stime, plus what reaped children left in the root's cutime/cstime).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Usage:
    """What a monitored run used."""

    returncode: int
    wall_s: float
    peak_rss_mb: float
    cpu_s: float


def _stat(pid: int) -> tuple[int, float, float, int] | None:
    """(ppid, own CPU s, reaped children's CPU s, RSS bytes) of ``pid``, None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    ppid, utime, stime, cutime, cstime = (int(fields[i]) for i in (1, 11, 12, 13, 14))
    return ppid, (utime + stime) / _TICK, (cutime + cstime) / _TICK, int(fields[21]) * _PAGE


def tree_usage(root: int) -> tuple[int, float]:
    """(RSS bytes, CPU seconds) of ``root`` and its descendants right now."""
    stats = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (found := _stat(int(entry.name))) is not None:
            stats[int(entry.name)] = found
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_rest) in stats.items():
        children.setdefault(ppid, []).append(pid)
    rss, cpu, todo = 0, 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            _, own, reaped, resident = stats[pid]
            rss, cpu = rss + resident, cpu + own + reaped
            todo += children.get(pid, [])
    return rss, cpu


def run_monitored(
    cmd: Sequence[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
    interval: float = 0.2, log: Path | None = None,
) -> Usage:  # fmt: skip
    """Run ``cmd`` to its end, sampling its process tree (see the module doc)."""
    out = log.open("wb") if log else None
    began = time.monotonic()
    process = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    peak, cpu = 0, 0.0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak, cpu
        while not done.is_set():
            rss, used = tree_usage(process.pid)
            peak, cpu = max(peak, rss), max(cpu, used)
            done.wait(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code = process.wait()
    done.set()
    sampler.join()
    if out:
        out.close()
    return Usage(code, time.monotonic() - began, peak / 2**20, cpu)


def _busy_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the machine since boot, from ``/proc/stat``."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def settle(busy_below: float = 0.1, window_s: float = 1.0, at_most_s: float = 30.0) -> float:
    """Flush the dirty pages (a topic just produced is still being written back) and wait until
    the CPUs were at most ``busy_below`` busy over a ``window_s`` window (at most ``at_most_s``),
    so a contender does not pay for the one before it; the seconds waited."""
    began = time.monotonic()
    os.sync()
    while time.monotonic() - began < at_most_s:
        busy, total = _busy_ticks()
        time.sleep(window_s)
        busy_after, total_after = _busy_ticks()
        if busy_after - busy <= busy_below * max(1, total_after - total):
            break
    return time.monotonic() - began
