"""Subprocess of the projection crash trials: maintains one SQL projection of a changelog in one
sink until the changelog's end (or, in the trials, until SIGKILLed).

Run as ``python -m tests.replay.projection.crash_worker``. It starts a small SparkSession (the
replay crash worker's), prints ``ready``, reads one :class:`ProjectionLayout` as a JSON line on
stdin and runs :func:`project_to_end`: the projection's first build to ``prefix`` if it has no
ledger, then the projection engine from its ledger to ``end`` in batches of ``batch_offsets``
offsets. Around every batch's sink write (``apply_sql``) it prints ``write <n>`` and
``committed <n>``, and ``done`` at the end.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, cast

from cdc.streams.protocol import TopicPartition
from cdc.streams.registry import open_stream
from projections import IncrementalPlan, SqlProjection, version_table
from replay.projection.engine import ProjectionEngine, ProjectionJob
from replay.projection.store import ProjectionStore
from replay.reading.bounds import Bound, BoundKind
from replay.sinks.protocol import LedgerEntry, Sink
from replay.sinks.registry import open_sink
from replay.spark import SparkSession
from tests.replay.tables.crash_worker import worker_spark

PROJECTION_SQL = (
    "CREATE TABLE payment_tiers AS SELECT CASE WHEN payments < 4 THEN 'new' "
    "WHEN payments < 8 THEN 'regular' ELSE 'loyal' END AS tier, COUNT(*) AS customers, "
    "SUM(total_amount) AS total, MIN(total_amount) AS smallest, MAX(total_amount) AS largest "
    "FROM payments_per_customer WHERE total_amount >= 100 GROUP BY 1"
)
"""Per tier of payment count, over customers with at least 100 paid: a payment moves a
customer's row between tiers or in and out of the WHERE, or changes its values in place. MIN
and MAX of one column share one multiset table (in Delta, every table costs commits a batch)."""
TABLE = version_table("payment_tiers", 1)


@dataclass(frozen=True)
class ProjectionLayout:
    """One projection run: the changelog ``topic`` of ``stream`` into ``sink``: a first build
    from the log start to ``prefix`` (next offset per partition) if the projection has no
    ledger, then up to ``end`` in batches of ``batch_offsets`` offsets."""

    stream: str
    topic: str
    sink: str
    prefix: dict[int, int]
    end: dict[int, int]
    batch_offsets: int

    def positions(self, offsets: dict[int, int]) -> dict[TopicPartition, int]:
        return {TopicPartition(self.topic, p): o for p, o in offsets.items()}

    def job(self, stop: dict[int, int] | None = None) -> ProjectionJob:
        """The projection's job up to ``stop`` (``end`` if None)."""
        bound = Bound(BoundKind.OFFSETS, offsets=self.positions(self.end if stop is None else stop))
        projection = SqlProjection.parse(PROJECTION_SQL)
        return ProjectionJob(projection, self.topic, stop=bound, batch_offsets=self.batch_offsets)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> ProjectionLayout:
        raw = json.loads(text)
        for name in ("prefix", "end"):
            raw[name] = {int(p): int(o) for p, o in raw[name].items()}
        return ProjectionLayout(**raw)


def projection_plan() -> IncrementalPlan:
    """The incremental plan of :data:`PROJECTION_SQL` in :data:`TABLE`."""
    plan = SqlProjection.parse(PROJECTION_SQL).check_incremental(TABLE)
    assert isinstance(plan, IncrementalPlan)
    return plan


class ReportingStore:
    """A projection store that calls ``report("write"|"committed", n)`` around each batch's
    ``apply_sql`` and hands everything else to the store it wraps."""

    def __init__(self, store: ProjectionStore, report: Callable[[str, int], None]) -> None:
        self.store, self.report, self.writes = store, report, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def apply_sql(self, *args: Any, **options: Any) -> LedgerEntry | None:
        self.writes += 1
        self.report("write", self.writes)
        entry = self.store.apply_sql(*args, **options)
        self.report("committed", self.writes)
        return entry


def project_to_end(
    spark: SparkSession,
    layout: ProjectionLayout,
    sink: Sink,
    report: Callable[[str, int], None] | None = None,
) -> None:
    """Build the projection to ``layout.prefix`` if it has no ledger (one write: the first
    build), then run it from its ledger to ``layout.end``: the same writes whether run once or
    resumed (a resume starts at the ledger's positions)."""
    stream = open_stream(layout.stream)
    try:
        engine = ProjectionEngine(spark, stream, sink)
        if report is not None:
            engine.store = cast(ProjectionStore, ReportingStore(engine.store, report))
        if not engine.store.positions(TABLE):
            engine.run(layout.job(layout.prefix))
        engine.run(layout.job())
    finally:
        stream.close()


def main() -> None:
    spark = worker_spark()
    print("ready", flush=True)
    layout = ProjectionLayout.from_json(sys.stdin.readline())
    sink = open_sink(layout.sink, spark)
    try:
        project_to_end(spark, layout, sink, lambda what, n: print(f"{what} {n}", flush=True))
    finally:
        sink.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
