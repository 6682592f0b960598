"""Replay progress: per topic and partition, where the replay stands, its lag and an ETA.

The engine reports a :class:`ReplayProgress` when a topic starts and after every committed
batch; :class:`ProgressBars` renders the reports with rich (one bar per topic: offsets done,
events/s, ETA, and the partitions still behind with their lag).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeRemainingColumn


@dataclass(frozen=True)
class PartitionProgress:
    """One partition: the next offset to apply, where this run stops, and the log's end."""

    position: int
    stop: int
    log_end: int

    @property
    def remaining(self) -> int:
        """Offsets left until this run's stop."""
        return max(0, self.stop - self.position)

    @property
    def lag(self) -> int:
        """Offsets behind the log's end (what a live reader would still have to apply)."""
        return max(0, self.log_end - self.position)


@dataclass(frozen=True)
class ReplayProgress:
    """A topic's progress within one replay run (offset counts, not records: compaction and
    transaction markers leave offsets without records)."""

    topic: str
    done: int
    total: int
    partitions: Mapping[int, PartitionProgress]
    seconds: float

    @property
    def rate(self) -> float:
        """Offsets applied per second so far."""
        return self.done / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left at the rate so far (None before the first batch)."""
        if self.done <= 0 or self.seconds <= 0:
            return None
        return (self.total - self.done) / self.rate

    def lag_text(self, limit: int = 4) -> str:
        """The partitions still behind their stop, ``p<partition> lag <n>``, worst first."""
        behind = sorted(
            ((p.remaining, n) for n, p in self.partitions.items() if p.remaining), reverse=True
        )
        parts = [f"p{n} lag {lag:,}" for lag, n in behind[:limit]]
        if len(behind) > limit:
            parts.append(f"+{len(behind) - limit} more")
        return ", ".join(parts) or "caught up"


ProgressCallback = Callable[[ReplayProgress], None]


class ProgressBars:
    """A rich progress display for replay runs: use as a context manager and pass ``report``
    to the engine."""

    def __init__(self, console: Console | None = None) -> None:
        self._bar = Progress(
            TextColumn("{task.description}"), BarColumn(),
            TextColumn("{task.completed:,.0f}/{task.total:,.0f} offsets"),
            TextColumn("{task.fields[rate]}"), TimeRemainingColumn(),
            TextColumn("{task.fields[lag]}"),
            console=console,
        )  # fmt: skip
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> ProgressBars:
        self._bar.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._bar.__exit__(kind, error, tb)

    def report(self, progress: ReplayProgress) -> None:
        """Show ``progress`` (the engine's callback)."""
        if progress.topic not in self._tasks:
            self._tasks[progress.topic] = self._bar.add_task(
                progress.topic, total=progress.total, rate="", lag=""
            )
        self._bar.update(
            self._tasks[progress.topic], total=progress.total, completed=progress.done,
            rate=f"{progress.rate:,.0f} offsets/s", lag=progress.lag_text(),
        )  # fmt: skip


def progress_of(
    topic: str, started: float, plan_start: Mapping[int, int], current: Mapping[int, int],
    stops: Mapping[int, int], log_ends: Mapping[int, int],
) -> ReplayProgress:  # fmt: skip
    """A report from the positions a run started at, has reached, and stops at."""
    partitions = {
        n: PartitionProgress(current[n], stops[n], max(log_ends[n], stops[n])) for n in current
    }
    done = sum(current[n] - plan_start[n] for n in current)
    total = sum(stops[n] - plan_start[n] for n in current)
    return ReplayProgress(topic, done, total, partitions, time.monotonic() - started)
