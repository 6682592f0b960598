"""Wall time per phase of the replay engine, for ``profile_rounds --phases``.

``PhaseTimers.install(spark)`` wraps the engine's steps (the module-level functions ``ReplayEngine``
calls, its schema read, the DuckDB sink's ledger reads, staging and write, the Delta sink's steps)
in timers that add up their wall time; ``report(rounds)`` prints the mean per round, largest
first. A profiling aid only: the wrappers stay until the process ends. Unlike cProfile it adds
almost nothing to a round, so the shares are those of an unprofiled round.
"""

from __future__ import annotations

import collections
import functools
import sys
import time
from pathlib import Path
from typing import Any

from replay.sinks import duckdb_files
from replay.sinks.delta_projection import DeltaProjectionStore
from replay.sinks.delta_sink import DeltaSink
from replay.sinks.delta_tombstones import DeltaTombstones
from replay.sinks.duckdb_sink import DuckDBSink
from replay.sinks.duckdb_store import DuckDBStore
from replay.spark import SparkSession
from replay.tables import engine

_ENGINE_STEPS = (
    "plan_replay", "hold_open_transactions", "read_records", "decode_native", "batch_changes",
    "find_truncates", "handle_bad_records",
)  # fmt: skip
_SINK_STEPS = (
    (engine.ReplayEngine, "_schema", "engine: newest schema read"),
    (DuckDBSink, "positions", "duckdb: ledger read (plan)"),
    (DuckDBSink, "_covered", "duckdb: ledger read (pre-check)"),
    (DuckDBSink, "merge", "duckdb: merge, all of it"),
    (DuckDBStore, "merge", "duckdb: MERGE transaction"),
    (duckdb_files, "connect", "duckdb: open the file"),
    (DeltaSink, "merge", "delta: merge, all of it"),
    (DeltaSink, "_plan", "delta: ledger read (plan)"),
    (DeltaSink, "_committed", "delta: ledger read (committed)"),
    (DeltaTombstones, "remember", "delta: tombstones append"),
    (DeltaTombstones, "newest", "delta: tombstones read (plan)"),
    (DeltaSink, "_apply", "delta: table write"),
    (DeltaSink, "_applicable", "delta: tombstone join (plan)"),
    (DeltaProjectionStore, "apply_sql", "delta projection: batch, all of it"),
    (DeltaProjectionStore, "recover", "delta projection: recover"),
    (DeltaProjectionStore, "write", "delta projection: table writes"),
    (DeltaProjectionStore, "sql", "delta projection: statements planned"),
    (DeltaProjectionStore, "_commit_master", "delta projection: master MERGE"),
)
"""(owner, attribute, label) of the other steps timed."""


class PhaseTimers:
    """Seconds spent in each wrapped step since the last ``clear``."""

    def __init__(self) -> None:
        self.seconds: collections.defaultdict[str, float] = collections.defaultdict(float)

    def install(self, spark: SparkSession) -> None:
        """Wrap the steps (once per process; ``spark`` tells the session's DataFrame class)."""
        for name in _ENGINE_STEPS:
            self._wrap(engine, name, name)
        for owner, attribute, label in _SINK_STEPS:
            self._wrap(owner, attribute, label)
        frames = type(spark.range(0))
        self._wrap(frames, "toArrow", "spark: toArrow (staging job)")
        self._wrap(frames, "first", "spark: first (delta stats)")
        self._wrap(frames, "localCheckpoint", "spark: localCheckpoint", by_caller=True)

    def clear(self) -> None:
        self.seconds.clear()

    def report(self, rounds: int) -> None:
        """Print the mean milliseconds per round of each step, largest first."""
        for name, seconds in sorted(self.seconds.items(), key=lambda kv: -kv[1]):
            print(f"  {name:34s} {seconds / max(1, rounds) * 1000:7.1f} ms per round")

    def _wrap(self, owner: Any, attribute: str, label: str, *, by_caller: bool = False) -> None:
        """Time ``owner.attribute`` under ``label`` (``by_caller``: one label per calling line)."""
        original = getattr(owner, attribute)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                name = label
                if by_caller:
                    caller = sys._getframe(1)
                    name = f"{label} ({Path(caller.f_code.co_filename).name}:{caller.f_lineno})"
                self.seconds[name] += time.perf_counter() - started

        setattr(owner, attribute, timed)
