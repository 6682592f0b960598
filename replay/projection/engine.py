"""The projection engine: read models maintained from a change topic into DuckDB or Delta,
exactly once, with the replay engine's planning and decoding.

A projection version is stored in ``<name>__v<n>`` (readers use the view ``<name>``, see
:mod:`replay.projection.versions`) and has its own ledger, keyed by that table. A run plans the
topic from the ledger (or the log start) to the stop bound, cuts it into batches (never
splitting a truncate across partitions, as the replay engine: see :mod:`replay.tables.batches`;
a truncate resets the whole projection) and applies each batch, with the positions it brings the
projection to, in one sink transaction (Delta: see :mod:`replay.sinks.delta_projection`): a
batch the ledger covers is skipped, so a retry after a crash neither loses nor doubles a change.

- SQL projections (:class:`~projections.SqlProjection`): the batch's newest change per key
  (``batch_changes``) is signed against the projection's mirror of the source table (``-old``
  image, ``+new`` image, :mod:`replay.sinks.sql_projection`), then the plan's statements apply it; a
  truncate resets the projection. A first build from the log start is one batch of the topic
  compacted, as the replay engine rebuilds a table (:mod:`replay.projection.sql_batches`).
- SCD and Python projections: every change of the batch, folded on the driver
  (:mod:`replay.projection.driver_folds`), written as row upserts and deletes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from cdc.events.columns import TableSpec as DeclaredTable
from cdc.streams.protocol import EventStream, StreamRecord, TopicPartition
from projections import IncrementalPlan, PythonProjection, ScdSpec, SqlProjection, version_table
from projections.errors import ProjectionError
from replay.decode.changes import OFFSET, PARTITION, TXN, decode_native
from replay.decode.schema import TopicSchema
from replay.decode.schema_versions import schema_in_range
from replay.decode.truncates import Truncate
from replay.projection.driver_folds import MemoryProjection, delta_frame, memory_schema
from replay.projection.sql_batches import SqlBatches, SqlTarget
from replay.projection.store import ProjectionStore, projection_store
from replay.reading.bounds import Bound, BoundKind
from replay.reading.plan import ReplayPlan, plan_replay
from replay.reading.sources import driver_rows, read_records
from replay.reading.transaction_tail import TransactionTail, hold_open_transactions
from replay.sinks.dead_letters import handle_bad_records
from replay.sinks.protocol import OP, POS, LedgerEntry, Sink
from replay.sinks.sql_projection import MirrorSql
from replay.spark import SparkSession
from replay.tables.batches import cut_batches, find_truncates, source_reach, truncates_in
from replay.tables.engine import ReplayError
from replay.tables.topic_schema import newest_record, newest_schema, unreadable_tail

_UNKEYED = (None, b"null", b'{"schema":null,"payload":null}')
Definition = SqlProjection | ScdSpec | PythonProjection
ProjectionProgress = Callable[[str, int, int], None]
"""Called with (stored table, offsets done, offsets in total)."""


@dataclass(frozen=True)
class ProjectionJob:
    """One projection version over one change topic."""

    definition: Definition
    topic: str
    version: int = 1
    stop: Bound = field(default_factory=lambda: Bound(BoundKind.LATEST))
    batch_offsets: int = 2_000_000
    row_schema: str | None = None
    """Python projections: the Spark DDL of their rows (``"title STRING, sold BIGINT"``)."""
    declared: DeclaredTable | None = None
    """The table shape of a topic written without schemas."""
    rebuilding: bool = False
    """Python folds see ``ctx.rebuilding`` (skip side effects) while this is set."""
    whole_transactions: bool = True
    """Hold back source transactions not whole yet at the tail (as ``ReplayJob``)."""
    transaction_settle_s: float = 60.0

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def table(self) -> str:
        """The stored table of this version (its ledger key)."""
        return version_table(self.name, self.version)

    def at_version(self, version: int) -> ProjectionJob:
        return replace(self, version=version)


@dataclass
class ProjectionResult:
    table: str
    mode: str  # "rebuild" (a first build), "catch-up", "up-to-date" or "waiting" (no row yet)
    span: int = 0
    seconds: float = 0.0
    entries: list[LedgerEntry] = field(default_factory=list)


class ProjectionEngine:
    """Runs projection jobs of one stream into one sink on one SparkSession."""

    def __init__(
        self, spark: SparkSession, stream: EventStream, sink: Sink, *,
        progress: ProjectionProgress | None = None,
    ) -> None:  # fmt: skip
        self.spark, self.stream, self.sink, self.progress = spark, stream, sink, progress
        self.sql = SqlBatches(spark, stream, sink, projection_store(sink))
        self._schemas: dict[str, TopicSchema] = {}
        self._memory: dict[str, tuple[MemoryProjection, dict[TopicPartition, int]]] = {}
        self.tail: TransactionTail | None = None
        """What the last ``run`` held back at the tail."""

    @property
    def store(self) -> ProjectionStore:
        """The sink's projection store, through which the SQL batches write too."""
        return self.sql.store

    @store.setter
    def store(self, store: ProjectionStore) -> None:
        self.sql.store = store

    def plan(self, job: ProjectionJob) -> ReplayPlan:
        """The offsets the next run of ``job`` applies (from its ledger to the stop bound)."""
        ledger = self.store.positions(job.table)
        start = Bound(BoundKind.LEDGER) if ledger else Bound(BoundKind.EARLIEST)
        return plan_replay(self.stream, [job.topic], start, job.stop, ledger)

    def lag(self, job: ProjectionJob) -> dict[TopicPartition, int]:
        """Per partition, the offsets of the topic the projection has not applied yet."""
        ledger = self.store.positions(job.table)
        out = {}
        for partition in range(self.stream.partition_count(job.topic)):
            tp = TopicPartition(job.topic, partition)
            bounds = self.stream.bounds(job.topic, partition)
            out[tp] = max(0, bounds.end - ledger.get(tp, bounds.log_start))
        return out

    def run(self, job: ProjectionJob) -> ProjectionResult:
        """Apply what the projection has not applied yet, batch by batch."""
        plan = self.plan(job)
        plan.check_gaps(False)
        if job.whole_transactions:
            self.tail = hold_open_transactions(
                self.spark, self.stream, {job.topic: plan}, job.transaction_settle_s
            )
            plan = self.tail.plans[job.topic]
        result = ProjectionResult(job.table, "up-to-date", span=plan.span)
        if plan.span == 0:
            return result
        started, result.mode = time.monotonic(), "catch-up"
        if job.declared is None and self._newest_row_event(job.topic) is None:
            unreadable = unreadable_tail(self.stream, job.topic)
            if unreadable is not None:  # records that are not JSON, not a topic to be written
                raise unreadable
            result.mode = "waiting"  # only truncates so far: no row, no schema to read yet
            return result
        schema = self.schema(job.topic, job.declared)
        if not schema.primary_key:
            raise ReplayError(f"topic {job.topic} has no primary key to mirror its table by")
        sql = self.sql_target(job) if isinstance(job.definition, SqlProjection) else None
        if sql is not None and self._builds_first(job, plan):
            built = self.sql.first_build(sql, schema, plan, job.batch_offsets)
            if built is not None:  # else images lacking values only older records hold
                result.mode, result.entries = "rebuild", built
                result.seconds = time.monotonic() - started
                if self.progress:
                    self.progress(job.table, plan.span, plan.span)
                return result
        batches = cut_batches(plan, job.batch_offsets)
        truncates: list[Truncate] | None = None  # one batch finds its own (SqlBatches.apply)
        if len(batches) > 1:  # never split a truncate across partitions (replay.tables.batches)
            truncates = find_truncates(self.spark, self.stream.url, plan, schema)
            reach = source_reach(self.spark, self.stream.url, plan, schema, truncates)
            batches = cut_batches(plan, job.batch_offsets, truncates, reach)
        for batch in batches:
            if sql is not None:
                known = None if truncates is None else truncates_in(truncates, batch)
                entry = self.sql.apply(sql, schema, batch, known)
            else:
                entry = self._memory_batch(job, schema, batch)
            result.entries += [entry] if entry else []
            if self.progress:
                done = sum(r.stop - p.start for r, p in zip(batch.ranges, plan.ranges, strict=True))
                self.progress(job.table, done, plan.span)
        result.seconds = time.monotonic() - started
        return result

    def schema(self, topic: str, declared: DeclaredTable | None = None) -> TopicSchema:
        """How ``topic`` decodes (as the replay engine reads it), cached per topic."""
        if topic not in self._schemas:
            newest = self._newest_row_event(topic)
            if newest is not None and newest.value is not None:
                self._schemas[topic] = TopicSchema.from_record(
                    newest.value, newest.key, declared, topic=topic
                )
            else:
                self._schemas[topic] = newest_schema(self.stream, topic, declared)
        return self._schemas[topic]

    def _newest_row_event(self, topic: str) -> StreamRecord | None:
        """The newest keyed change record near the end of ``topic`` (a truncate, keyed by
        ``null``, carries no primary key to read the schema from)."""
        return newest_record(self.stream, topic, lambda record: record.key not in _UNKEYED)

    def sql_plan(self, job: ProjectionJob) -> tuple[IncrementalPlan, MirrorSql]:
        """The incremental plan of a SQL projection's version, and its source mirror."""
        definition = job.definition
        assert isinstance(definition, SqlProjection)
        plan = definition.check_incremental(job.table)
        if not isinstance(plan, IncrementalPlan):
            raise ProjectionError(
                f"projection {definition.name} is declared maintain='recompute': the engine "
                "maintains incremental projections only"
            )
        keys = self.schema(job.topic, job.declared).primary_key
        return plan, MirrorSql.of(job.table, keys, definition.source_columns)

    def sql_target(self, job: ProjectionJob) -> SqlTarget:
        """A SQL projection's version as :class:`SqlBatches` applies it."""
        return SqlTarget(job.name, job.topic, job.table, *self.sql_plan(job))

    def _builds_first(self, job: ProjectionJob, plan: ReplayPlan) -> bool:
        """Whether the run is the projection's first build: from the log start (no ledger) to
        a stop that is no source-position cut (which is judged per event)."""
        return (
            plan.from_log_start
            and not job.stop.is_source_position
            and not self.store.positions(job.table)
        )

    def _memory_batch(
        self, job: ProjectionJob, schema: TopicSchema, batch: ReplayPlan
    ) -> LedgerEntry | None:
        projection = self._warm(job, schema)
        rows, frame_schema = self._decoded(schema, batch)
        assert not isinstance(job.definition, SqlProjection)
        delta = projection.apply(rows, rebuilding=job.rebuilding)
        table_schema = memory_schema(job.definition, frame_schema, job.row_schema, self.spark)
        frame = delta_frame(self.spark, table_schema, delta)
        positions = batch.stop_positions
        entry = self.store.apply_rows(
            job.table, projection.identity, frame, delta.truncated, positions,
            rows_at_most=len(delta.upserts) + len(delta.deletes),
        )  # fmt: skip
        stored = self.store.positions(job.table)
        self._memory[job.table] = (projection, stored)
        return entry

    def _warm(self, job: ProjectionJob, schema: TopicSchema) -> MemoryProjection:
        """The projection's executor, at the positions of its ledger (re-folded from the log
        start when this engine does not hold it at those positions)."""
        ledger = self.store.positions(job.table)
        held = self._memory.get(job.table)
        if held is not None and held[1] == ledger:
            return held[0]
        assert not isinstance(job.definition, SqlProjection)
        projection = MemoryProjection(job.definition, schema.primary_key)
        if ledger:
            history = plan_replay(self.stream, [job.topic], Bound(BoundKind.EARLIEST),
                                  Bound(BoundKind.OFFSETS, offsets=ledger))  # fmt: skip
            projection.apply(self._decoded(schema, history)[0], rebuilding=True)
        self._memory[job.table] = (projection, ledger)
        return projection

    def _decoded(self, schema: TopicSchema, plan: ReplayPlan) -> tuple[list[dict[str, Any]], Any]:
        """Every change of ``plan`` as dicts (table columns, ``__op``, ``__pos``), in order."""
        records = read_records(self.spark, self.stream.url, plan, cut_prefix=schema.value_prefix)
        local = driver_rows(self.stream.url, plan)
        schema = schema_in_range(plan.ranges[0].tp.topic, lambda: records, schema, rows=local)
        decoded = decode_native(records, schema)
        handle_bad_records(self.sink, decoded.bad, "fail", plan.stop_positions, "projection")
        columns = [c.name for c in schema.columns]
        frame = decoded.good.select(*columns, OP, POS, TXN, PARTITION, OFFSET)
        rows = sorted(
            (r.asDict() for r in frame.collect()),
            key=lambda r: (r[POS], r[PARTITION], r[OFFSET]),
        )
        return rows, frame.schema
