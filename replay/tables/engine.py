"""The replay engine: change topics -> Spark -> DuckDB/Delta tables, exactly once.

Per topic, one target table (named after the topic's last dotted part, or ``into`` for a
point-in-time copy). A fresh table read from the log start takes the fast path: compact to the
newest record per key as each partition is read (``decode.compacted_read``), decode only the
survivors, one bulk ``replace`` (as one batch where a newest image lacks an unchanged TOAST
value, which only older records hold). Otherwise the plan is cut into batches and each batch is
``merge``d with the positions it brings the table to, stored in the same sink transaction as
the data: a retried batch is skipped, and a crash leaves the table at its last committed batch.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from cdc.events.columns import TableSpec as DeclaredTable
from cdc.streams.protocol import EventStream, TopicPartition
from replay.decode.batch import batch_changes, marked_batch, truncates_decoded
from replay.decode.changes import UNAVAILABLE, decode_native
from replay.decode.clean_guess import replaced_on_guess
from replay.decode.compacted_read import persisted_decode
from replay.decode.compaction import rebuild_table, write_bounds
from replay.decode.cut import records_at_or_before, straddling_transactions
from replay.decode.schema import TopicSchema
from replay.decode.schema_versions import column_defaults, schema_in_range
from replay.decode.truncates import Truncate
from replay.progress import ProgressCallback, progress_of
from replay.reading.bounds import Bound, BoundKind
from replay.reading.plan import ReplayPlan, plan_replay, resolve_topics
from replay.reading.sources import driver_rows, read_by_driver, read_records
from replay.reading.transaction_tail import TransactionTail, hold_open_transactions
from replay.sinks.dead_letters import DeadLetterPolicy, handle_bad_records
from replay.sinks.protocol import (
    OP,
    OP_UPSERT,
    POS,
    LedgerEntry,
    RejectedRecordsError,
    Sink,
    TableSpec,
)
from replay.spark import DataFrame, F, SparkSession
from replay.tables.batches import cut_batches, find_truncates, source_reach, truncates_in
from replay.tables.topic_schema import ReplayError, newest_schema, target_table


@dataclass(frozen=True)
class ReplayJob:
    """What to replay, from where to where, and into what."""

    topics: tuple[str, ...]
    start: Bound = field(default_factory=lambda: Bound(BoundKind.EARLIEST))
    stop: Bound = field(default_factory=lambda: Bound(BoundKind.LATEST))
    into: Mapping[str, str] = field(default_factory=dict)
    """Per topic, a new table to build instead of the topic's own (point-in-time copies)."""
    declared: Mapping[str, DeclaredTable] = field(default_factory=dict)
    """Per topic, the table shape of records written without schemas."""
    on_error: DeadLetterPolicy = "fail"
    allow_gaps: bool = False
    batch_offsets: int = 2_000_000
    """Offsets per incremental batch (over all partitions of a topic)."""
    whole_transactions: bool = True
    """Hold back source transactions whose END or events have not all arrived (topics with a
    transaction metadata topic: see ``replay.reading.transaction_tail``)."""
    transaction_settle_s: float = 60.0
    """Transactions this much older than the newest metadata record count as complete."""
    allow_type_rewrite: bool = False
    """A column narrowed or changed incompatibly mid-stream: cast older values to the new type
    instead of stopping (``replay.decode.schema_versions``)."""


@dataclass
class TopicResult:
    topic: str
    table: str
    mode: str  # "rebuild", "catch-up" or "up-to-date"
    span: int = 0
    bad: int = 0
    seconds: float = 0.0
    entries: list[LedgerEntry] = field(default_factory=list)


class ReplayEngine:
    """Runs replay jobs of one stream into one sink on one SparkSession."""

    def __init__(
        self, spark: SparkSession, stream: EventStream, sink: Sink, *,
        progress: ProgressCallback | None = None,
    ) -> None:  # fmt: skip
        self.spark, self.stream, self.sink, self.progress = spark, stream, sink, progress
        self._straddling: tuple[str, ...] = ()
        # The ledgers ``plans`` read, per table: a --follow round opens the ledger once, not twice.
        self._ledgers: dict[str, dict[TopicPartition, int]] = {}
        self._schemas: dict[str, TopicSchema] = {}
        self.tail: TransactionTail | None = None
        """What the last ``run`` held back at the tail."""

    def plans(self, job: ReplayJob) -> dict[str, ReplayPlan]:
        """The plan of every topic of the job (ranges, gaps), without running anything."""
        out = {}
        for topic in resolve_topics(self.stream, job.topics):
            table = job.into.get(topic, target_table(topic))
            ledger = self._ledgers[table] = self.sink.positions(table)
            start = job.start
            if start.kind is BoundKind.LEDGER and not ledger:
                start = Bound(BoundKind.EARLIEST)
            out[topic] = plan_replay(self.stream, [topic], start, job.stop, ledger)
        return out

    def run(self, job: ReplayJob) -> list[TopicResult]:
        """Replay every topic of the job; returns what was done per topic."""
        self._ledgers = {}
        plans = self.plans(job)
        for plan in plans.values():
            plan.check_gaps(job.allow_gaps)
        self.tail = self.transaction_tail(job, plans)
        plans = dict(self.tail.plans)
        self._schemas = {}
        for topic, plan in plans.items():  # each record decodes by its own schema version
            if plan.span:
                base = self._schema(topic, job.declared.get(topic))
                if not base.versioned:  # no versions to look for: no Spark source to set up
                    self._schemas[topic] = base
                    continue
                self._schemas[topic] = self._versions(job, topic, plan, base)
        self._straddling = straddling_transactions(
            self.spark, self.stream.url, plans, job.stop,
            lambda topic: self._schema(topic, job.declared.get(topic)),
        )  # fmt: skip
        return [self._run_topic(job, topic, plan) for topic, plan in plans.items()]

    def _versions(
        self, job: ReplayJob, topic: str, plan: ReplayPlan, base: TopicSchema
    ) -> TopicSchema:
        """``schema_in_range`` of the plan; its records' Spark frame is built only if needed."""
        records = partial(read_records, self.spark, self.stream.url, plan)
        return schema_in_range(
            topic, records, base, allow_rewrite=job.allow_type_rewrite,
            up_to_cut=(lambda: records_at_or_before(records(), job.stop))  # the cut's columns
            if job.stop.is_source_position else None, rows=driver_rows(self.stream.url, plan),
        )  # fmt: skip

    def transaction_tail(self, job: ReplayJob, plans: Mapping[str, ReplayPlan]) -> TransactionTail:
        """``plans`` cut back before the source transactions not whole yet at the tail."""
        if not job.whole_transactions:
            return TransactionTail(plans, {}, per_event=True)
        return hold_open_transactions(self.spark, self.stream, plans, job.transaction_settle_s)

    def _run_topic(self, job: ReplayJob, topic: str, plan: ReplayPlan) -> TopicResult:
        table = job.into.get(topic, target_table(topic))
        result = TopicResult(topic, table, "up-to-date", span=plan.span)
        if plan.span == 0:
            return result
        started = time.monotonic()
        self._report(topic, started, plan, plan)
        schema = self._schema(topic, job.declared.get(topic))
        spec = TableSpec(table, schema.primary_key, defaults=column_defaults(self.spark, schema))
        # Read again for a table an earlier topic of the run may have written.
        known = self._ledgers.pop(table, None)
        ledger = known if known is not None else self.sink.positions(table)
        if not ledger and plan.from_log_start:
            result.mode = "rebuild"
            entry = self._rebuild(job, spec, schema, plan, result)
            result.entries += [entry] if entry else []
        else:
            if table in job.into.values() and not ledger:
                raise ReplayError(
                    f"a point-in-time table ({table}) is built from the log start; "
                    f"{topic} starts later"
                )
            result.mode = "catch-up"
            batches = cut_batches(plan, job.batch_offsets)
            truncates = None  # else found by the lone batch in its cached decode (``_merge``)
            if len(batches) > 1:  # never split a truncate across partitions (replay.tables.batches)
                truncates = find_truncates(self.spark, self.stream.url, plan, schema)
                reach = source_reach(self.spark, self.stream.url, plan, schema, truncates)
                batches = cut_batches(plan, job.batch_offsets, truncates, reach)
            elif read_by_driver(self.stream.url, plan):  # its truncates are found on the driver
                truncates = find_truncates(self.spark, self.stream.url, plan, schema)
            for batch in batches:
                entry = self._merge(job, spec, schema, batch, result, truncates)
                result.entries += [entry] if entry else []
                self._report(topic, started, plan, batch)
        if result.mode == "rebuild":
            self._report(topic, started, plan, ReplayPlan(plan.ranges, (), plan.stop))
        result.seconds = time.monotonic() - started
        return result

    def _report(self, topic: str, started: float, plan: ReplayPlan, reached: ReplayPlan) -> None:
        """Report ``topic``'s progress: ``reached``'s ranges end where the run now stands (the
        plan itself before the first batch: nothing done yet)."""
        if self.progress is None:
            return
        start = {r.tp.partition: r.start for r in plan.ranges}
        current = start if reached is plan else {r.tp.partition: r.stop for r in reached.ranges}
        stops = {r.tp.partition: r.stop for r in plan.ranges}
        ends = {r.tp.partition: r.log_end for r in plan.ranges}
        self.progress(progress_of(topic, started, start, current, stops, ends))

    def _schema(self, topic: str, declared: DeclaredTable | None) -> TopicSchema:
        """How the topic decodes: its schema versions in this run's range, else the schema of
        its newest change event, else ``declared``."""
        if topic in self._schemas:
            return self._schemas[topic]
        return newest_schema(self.stream, topic, declared)

    def _rebuild(
        self, job: ReplayJob, spec: TableSpec, schema: TopicSchema, plan: ReplayPlan,
        result: TopicResult,
    ) -> LedgerEntry | None:  # fmt: skip
        persisted: list[DataFrame] = []
        rows: Callable[[], DataFrame]
        rebuilt, bounds = None, write_bounds(plan.span)
        if not job.stop.is_source_position:
            guessed = replaced_on_guess(self.spark, self.sink, self.stream.url, spec, schema, plan)
            if guessed.done:  # in one job, with no cache (else nothing written)
                return guessed.entry
            # Compacted and decoded in one job: the bad-record check and the write read it.
            decoded, persisted, found = persisted_decode(
                self.spark, self.stream.url, plan, schema, over_budget=guessed.over_budget
            )
            rebuilt = rebuild_table(decoded, schema, found)
            if found.lacking and rebuilt.lacks_values():  # as a batch: filled from older images
                rebuilt = None
                while persisted:
                    persisted.pop().unpersist()
        if rebuilt is None:
            records = read_records(self.spark, self.stream.url, plan)
            cut = job.stop if job.stop.is_source_position else None
            changes = batch_changes(records, schema, cut=cut, straddling=self._straddling)
            bad, rows = changes.bad, lambda: changes.changes.where(F.col(OP) == OP_UPSERT)
        else:  # rows() after the check: decoded is cached
            bad, rows, bounds = rebuilt.bad, rebuilt.rows, rebuilt.bounds(plan.span)
        try:
            result.bad += handle_bad_records(
                self.sink, bad, job.on_error, plan.stop_positions, spec.name
            )
            columns = [c.name for c in schema.columns]
            return self.sink.replace(
                spec, rows().select(*columns, POS), plan.stop_positions, **bounds
            )
        finally:
            for frame in persisted:
                frame.unpersist()

    def _merge(
        self, job: ReplayJob, spec: TableSpec, schema: TopicSchema, batch: ReplayPlan,
        result: TopicResult, truncates: Sequence[Truncate] | None,
    ) -> LedgerEntry | None:  # fmt: skip
        records = read_records(self.spark, self.stream.url, batch, cut_prefix=schema.value_prefix)
        cut = job.stop if job.stop.is_source_position else None
        decoded = decode_native(records, schema)
        # A batch the driver read is decoded by the write's own job (``marked_batch``), again
        # only if it holds bad records; one read by the executors is decoded once, cached.
        cached = not read_by_driver(self.stream.url, batch)
        if cached:
            decoded.all.persist()
        try:
            if truncates is None and not cut:  # a job that fills the cache the others read
                truncates = truncates_decoded(decoded)
            known = None if cut or truncates is None else truncates_in(truncates, batch)
            positions, most = batch.stop_positions, batch.span
            changes_of_batch = partial(
                batch_changes, records, schema, cut=cut, straddling=self._straddling,
                decoded=decoded, truncates=known,
            )  # fmt: skip
            if not cached:  # bad records looked for by the write's own job (``Sink.merge``)
                marked = (marked_batch(decoded, schema, known) if known is not None
                          else changes_of_batch().marked_changes(schema))  # fmt: skip
                with contextlib.suppress(RejectedRecordsError):  # some: the policy, below
                    return self.sink.merge(spec, marked, positions, rows_at_most=most)
            changes = changes_of_batch()
            # (Cached: a job of its own fills the cache; cheaper than the write's union of two.)
            result.bad += handle_bad_records(
                self.sink, changes.bad, job.on_error, positions, spec.name
            )
            frame: DataFrame = changes.sink_changes(schema)
            return self.sink.merge(spec, frame, positions, rows_at_most=most)
        finally:
            if cached:
                decoded.all.unpersist()


__all__ = ["UNAVAILABLE", "ReplayEngine", "ReplayError", "ReplayJob", "TopicResult", "target_table"]
