"""Subprocess of the replay crash trials: replays one changelog into one sink until told to stop
(or, in the trials, until SIGKILLed).

Run as ``python -m tests.replay.tables.crash_worker``. It starts a small SparkSession
(``local[1]``), prints ``ready``, then reads one :class:`ReplayLayout` as a JSON line on stdin and
runs :func:`replay_to_end`: a rebuild of the changelog's first offsets if the table has no ledger
yet, then a catch-up from the ledger in small batches. Around every sink write it prints
``write <n>`` and ``committed <n>`` (n counts this process's writes), and ``done`` at the end.
Starting the JVM before the layout is known lets the test warm the next worker up while it
checks the previous one.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from cdc.runtime import jars
from cdc.streams.protocol import TopicPartition
from cdc.streams.registry import open_stream
from replay.reading.bounds import Bound, BoundKind
from replay.sinks.protocol import Guess, LedgerEntry, Positions, Sink, TableSpec, WriteBounds
from replay.sinks.registry import open_sink
from replay.spark import SparkSession, spark_session
from replay.tables.engine import ReplayEngine, ReplayJob, target_table


@dataclass(frozen=True)
class ReplayLayout:
    """One replay to run: ``prefix`` (next offset per partition) is what the first, rebuilding
    write covers; the catch-up then goes to ``end`` in batches of ``batch_offsets`` offsets."""

    stream: str
    topic: str
    sink: str
    prefix: dict[int, int]
    end: dict[int, int]
    batch_offsets: int

    @property
    def table(self) -> str:
        return target_table(self.topic)

    def positions(self, offsets: dict[int, int]) -> dict[TopicPartition, int]:
        return {TopicPartition(self.topic, p): o for p, o in offsets.items()}

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> ReplayLayout:
        raw = json.loads(text)
        for name in ("prefix", "end"):
            raw[name] = {int(p): int(o) for p, o in raw[name].items()}
        return ReplayLayout(**raw)


class ReportingSink:
    """A sink that calls ``report("write"|"committed", n)`` around each of its writes."""

    def __init__(self, sink: Sink, report: Callable[[str, int], None]) -> None:
        self.sink, self.report, self.url, self.writes = sink, report, sink.url, 0
        self.guess_bytes = sink.guess_bytes

    def positions(self, table: str) -> dict[TopicPartition, int]:
        return self.sink.positions(table)

    def replace(
        self, spec: TableSpec, rows: Any, positions: Positions, *, rows_at_most: int | None = None,
        bytes_at_most: int | None = None, guess: Guess | None = None,
    ) -> LedgerEntry | None:  # fmt: skip
        bounds = WriteBounds(rows_at_most=rows_at_most, bytes_at_most=bytes_at_most)
        return self._write(lambda: self.sink.replace(spec, rows, positions, **bounds, guess=guess))

    def merge(
        self, spec: TableSpec, changes: Any, positions: Positions, *,
        rows_at_most: int | None = None,
    ) -> LedgerEntry | None:  # fmt: skip
        return self._write(
            lambda: self.sink.merge(spec, changes, positions, rows_at_most=rows_at_most)
        )

    def history(self, table: str) -> list[LedgerEntry]:
        return list(self.sink.history(table))

    def read(self, table: str, version: int | None = None) -> Any:
        return self.sink.read(table, version)

    def tables(self) -> list[str]:
        return self.sink.tables()

    def close(self) -> None:
        self.sink.close()

    def _write(self, write: Callable[[], LedgerEntry | None]) -> LedgerEntry | None:
        self.writes += 1
        self.report("write", self.writes)
        entry = write()
        self.report("committed", self.writes)
        return entry


def replay_to_end(spark: SparkSession, layout: ReplayLayout, sink: Sink) -> None:
    """Rebuild the table from the changelog's ``prefix`` if it has no ledger, then catch up to
    ``end`` from the ledger: the same sequence of writes whether run once or resumed."""
    stream = open_stream(layout.stream)
    try:
        engine = ReplayEngine(spark, stream, sink)
        topics = (layout.topic,)
        if not sink.positions(layout.table):
            prefix = Bound(BoundKind.OFFSETS, offsets=layout.positions(layout.prefix))
            engine.run(ReplayJob(topics, stop=prefix))
        stop = Bound(BoundKind.OFFSETS, offsets=layout.positions(layout.end))
        engine.run(
            ReplayJob(topics, start=Bound(BoundKind.LEDGER), stop=stop,
                      batch_offsets=layout.batch_offsets)
        )  # fmt: skip
    finally:
        stream.close()


def worker_spark() -> SparkSession:
    """A SparkSession as small as the replay allows: one core, one shuffle partition, a small
    heap (the JIT keeps its C2 tier: capping it at C1 made a worker's batches 60% slower)."""
    log4j = jars.cache_dir() / "spark-log4j2.properties"
    java = f"-Dlog4j2.configurationFile=file:{log4j} -XX:+UseSerialGC"
    conf = {
        "spark.driver.memory": "1g",
        "spark.driver.extraJavaOptions": java,
        "spark.sql.shuffle.partitions": "1",
        "spark.default.parallelism": "1",
        "spark.databricks.delta.snapshotPartitions": "1",
        "spark.sql.adaptive.enabled": "false",
    }
    return spark_session("local[1]", app_name="replay-crash-worker", conf=conf)


def main() -> None:
    spark = worker_spark()
    print("ready", flush=True)
    layout = ReplayLayout.from_json(sys.stdin.readline())
    sink = ReportingSink(
        open_sink(layout.sink, spark), lambda what, n: print(f"{what} {n}", flush=True)
    )
    try:
        replay_to_end(spark, layout, sink)
    finally:
        sink.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
