"""How a SQL projection's changes reach its store: batches of the topic, or a first build.

A batch is the newest change per key of a range of the topic (``batch_changes``), which the
store signs against the projection's mirror of the source table. A SQL projection is a function
of that table, so a first build (from the log start into an empty projection) needs only the
table as the whole range leaves it: the newest live image of every key. That is the replay
engine's rebuild (``compacted_read.persisted_decode``, ``compaction.rebuild_table``: each
partition compacted as it is read, only the survivors decoded) applied as one batch of upserts,
where the batch path reads and decodes every record of the range to pick the newest per key (a
1 M-record topic over 100 k keys: ten times the decoding). As in a rebuild, a bad record is not
reached where a later record of its key supersedes it or a truncate after it in its partition
clears it, and a keyed-by-null record that is not a truncate is a bad record; a bad survivor
fails the build. Compaction keeps a partition's newest record of a key by offset, the batch
path the newest change by source position: the same where positions grow with offsets.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from cdc.streams.protocol import EventStream
from projections import IncrementalPlan
from projections.errors import ProjectionError
from replay.decode.batch import batch_changes, marked_batch, truncates_decoded
from replay.decode.changes import decode_native
from replay.decode.compacted_read import persisted_decode
from replay.decode.compaction import Rebuild, rebuild_table
from replay.decode.schema import TopicSchema
from replay.decode.schema_versions import retyped_columns, schema_in_range
from replay.decode.truncates import Truncate, flagged_truncated
from replay.projection.store import ProjectionStore
from replay.reading.plan import ReplayPlan
from replay.reading.sources import driver_rows, read_by_driver, read_records
from replay.sinks.dead_letters import handle_bad_records
from replay.sinks.protocol import (
    OP,
    POS,
    TRUNCATED,
    LedgerEntry,
    RejectedRecordsError,
    Sink,
)
from replay.sinks.sql_projection import MirrorSql
from replay.spark import DataFrame, F, SparkSession
from replay.tables.batches import find_truncates


@dataclass(frozen=True)
class SqlTarget:
    """One SQL projection version: its name, source topic, stored table, incremental plan and
    source mirror."""

    name: str
    topic: str
    table: str
    plan: IncrementalPlan
    mirror: MirrorSql


class SqlBatches:
    """Applies a SQL projection's batches and first builds, each with its ledger entry."""

    def __init__(
        self, spark: SparkSession, stream: EventStream, sink: Sink, store: ProjectionStore
    ) -> None:
        self.spark, self.stream, self.sink, self.store = spark, stream, sink, store

    def apply(
        self, target: SqlTarget, schema: TopicSchema, batch: ReplayPlan,
        truncates: Sequence[Truncate] | None,
    ) -> LedgerEntry | None:  # fmt: skip
        """Apply one batch; ``truncates``: the batch's, when the run found them already."""
        url, mirror = self.stream.url, target.mirror
        records = read_records(self.spark, url, batch, cut_prefix=schema.value_prefix)
        schema = self._schema(target, schema, batch, lambda: records)
        decoded = decode_native(records, schema)
        if read_by_driver(url, batch):  # as ReplayEngine does
            if truncates is None:
                truncates = find_truncates(self.spark, url, batch, schema)
            marked = marked_batch(decoded, schema, truncates)
            frame = marked.select(*mirror.all_columns, OP, POS, TRUNCATED)
            with contextlib.suppress(RejectedRecordsError):  # some: refused by the write below
                return self.store.apply_sql(
                    target.plan, mirror, frame, batch.stop_positions, rows_at_most=batch.span
                )
        decoded.all.persist()  # read and decoded once: truncates, bad records, the write
        try:
            if truncates is None:
                truncates = truncates_decoded(decoded)
            changes = batch_changes(records, schema, truncates=truncates, decoded=decoded)
            handle_bad_records(self.sink, changes.bad, "fail", batch.stop_positions, target.table)
            frame = changes.changes.select(*mirror.all_columns, OP, POS, TRUNCATED)
            return self.store.apply_sql(
                target.plan, mirror, frame, batch.stop_positions, rows_at_most=batch.span
            )
        finally:
            decoded.all.unpersist()

    def first_build(
        self, target: SqlTarget, schema: TopicSchema, plan: ReplayPlan, batch_offsets: int
    ) -> list[LedgerEntry] | None:
        """Apply ``plan`` (from the log start) as the topic compacted, in one batch (the module
        doc): its ledger entry, if written. None where batches must build it: a kept image lacks
        a value Debezium could not read (unchanged TOAST) whose older image compaction dropped,
        or the store holds a batch on the driver and the range has more keys than
        ``batch_offsets``."""
        url, prefix = self.stream.url, schema.value_prefix
        records = partial(read_records, self.spark, url, plan, cut_prefix=prefix)
        schema = self._schema(target, schema, plan, records)  # a Spark read only if versioned
        decoded, persisted, found = persisted_decode(self.spark, url, plan, schema)
        try:
            if self.store.batch_on_driver and (found.keys or 0) > batch_offsets:
                return None
            rebuilt = rebuild_table(decoded, schema, found)
            if found.lacking and rebuilt.lacks_values():
                return None
            handle_bad_records(self.sink, rebuilt.bad, "fail", plan.stop_positions, target.table)
            frame = _as_batch(rebuilt, schema).select(
                *target.mirror.all_columns, OP, POS, TRUNCATED
            )
            most = None if found.keys is None else found.keys + 1  # and a truncate's row
            entry = self.store.apply_sql(
                target.plan, target.mirror, frame, plan.stop_positions, rows_at_most=most
            )
            return [entry] if entry else []
        finally:
            for frame in persisted:
                frame.unpersist()

    def _schema(
        self, target: SqlTarget, schema: TopicSchema, batch: ReplayPlan, records: Callable[[], Any]
    ) -> TopicSchema:
        """How the batch's records decode (each by its own schema), checked against the
        columns the projection mirrors: none dropped, none retyped."""
        schema = schema_in_range(
            target.topic, records, schema, rows=driver_rows(self.stream.url, batch)
        )
        mirrored = target.mirror.all_columns
        missing = [c for c in mirrored if c not in {s.name for s in schema.columns}]
        if missing:
            raise ProjectionError(
                f"projection {target.name}: topic {target.topic} has no column {missing[0]}"
                + (" (dropped from the source table)" if schema.versions else "")
            )
        for name, types in retyped_columns(schema).items():
            if name in mirrored:
                raise ProjectionError(
                    f"projection {target.name}: column {name} of topic {target.topic} changed "
                    f"type ({' -> '.join(types)}) in offsets {_ranges_text(batch)}: build a new "
                    "version of the projection over the new type"
                )
        return schema


def _ranges_text(plan: ReplayPlan) -> str:
    return ", ".join(f"{r.tp.topic}:{r.tp.partition}:{r.start}-{r.stop}" for r in plan.ranges)


def _as_batch(rebuilt: Rebuild, schema: TopicSchema) -> DataFrame:
    """The rebuilt range as ``batch_changes`` has a batch: the newest change of every key (a
    delete leaves the mirror a tombstone, so an older change that comes later, from another
    partition, cannot bring the key back), flagged truncated with its ``t`` row where the range
    holds a truncate. Into an empty projection only the upserts count; the deletes and the flag
    make the build right over a projection another follower built meanwhile, as a batch is."""
    newest = rebuilt.newest()
    if not (rebuilt.found is None or rebuilt.found.candidates):  # no truncate to look for
        return newest.withColumn(TRUNCATED, F.lit(False))
    columns = [(c.name, c.codec.spark) for c in schema.columns]
    return flagged_truncated(newest, rebuilt.truncates, columns)
