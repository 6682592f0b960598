"""Incremental batches: every record of a batch decoded, and the newest change of each key.

``batch_changes`` gives the frame ``Sink.merge`` takes (see ``replay.sinks.protocol``): at most
one change per primary key, the one with the highest ``__pos`` (``__op`` ``u`` or ``d``). A
truncate in the batch clears the table at it: the changes it clears are dropped (in its
partition those at or before it, in the others those before it in source order: see
``truncates.after_truncates``), every row is marked ``__truncated``, and one ``t`` row
(null columns) is added, which sinks apply as the truncate and drop. ``truncates`` gives the
truncate offsets, for an engine that prefers to split the batch at them. Truncates are looked
for among the records whose key is null or the changelog's truncate key (Debezium's and ours).

A column the newest change could not read (``__unavailable``, unchanged TOAST) takes its value
from the newest older change of the key in the batch that has it; columns no change of the batch
has stay null and listed in ``__unavailable`` (the sink must keep the stored value for them;
``sink_changes`` leaves that column out for sinks that do not know it).

A caller that runs several jobs over one batch (the bad-record check, then the write) decodes it
once: ``decode(records, schema)``, ``Decoded.all.persist()``, then ``batch_changes(...,
decoded=...)``; ``truncates_decoded`` finds the batch's truncates from the same frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cdc.streams.protocol import TopicPartition
from replay.decode.changes import (
    ERROR,
    KEY,
    OFFSET,
    PARTITION,
    TOPIC,
    UNAVAILABLE,
    VALUE,
    Decoded,
    Decoder,
    decode_native,
)
from replay.decode.cut import cut_at
from replay.decode.schema import TopicSchema
from replay.decode.truncates import (
    TRUNCATES_SCHEMA,
    Truncate,
    after_known_truncates,
    after_truncates,
    cleared_by,
    flagged_truncated,
    is_truncate_candidate,
    truncate_offsets,
)
from replay.driver_frames import ColumnList, local_frame
from replay.expression_cache import ExpressionCache
from replay.reading.bounds import Bound
from replay.sinks.protocol import OP, OP_REJECTED, OP_TRUNCATE, OP_UPSERT, POS, TRUNCATED
from replay.spark import Column, DataFrame, F, SparkSession


@dataclass(frozen=True)
class BatchChanges:
    """``changes`` for ``Sink.merge`` (plus ``__unavailable``), the truncates seen (topic,
    partition, ``__truncate_offset``) and the bad records (``decode.BAD_COLUMNS``)."""

    changes: DataFrame
    truncates: DataFrame
    bad: DataFrame

    def sink_changes(self, schema: TopicSchema) -> DataFrame:
        """``changes`` without ``__unavailable``: the columns ``Sink.merge`` takes."""
        return self.changes.select(*(c.name for c in schema.columns), OP, POS, TRUNCATED)

    def marked_changes(self, schema: TopicSchema) -> DataFrame:
        """``sink_changes`` plus a row with ``__op`` ``x`` per bad record: ``Sink.merge`` then
        refuses a batch that has any, in the job that writes it (``replay.sinks.protocol``)."""
        marks = _rejected_marks.get(schema, None, lambda: _rejected_mark_columns(schema))
        return self.sink_changes(schema).unionByName(self.bad.select(*marks))


_rejected_marks: ExpressionCache[list[Column]] = ExpressionCache()


def _rejected_mark_columns(schema: TopicSchema) -> list[Column]:
    # Literals only: the bad records' reason (a Python UDF) is pruned from the plan.
    return [
        *(F.lit(None).cast(c.codec.spark).alias(c.name) for c in schema.columns),
        F.lit(OP_REJECTED).alias(OP),
        F.lit(None).cast("string").alias(POS),
        F.lit(False).alias(TRUNCATED),
    ]


@dataclass(frozen=True)
class _NewestPlan:
    """The expressions of ``newest_filled`` for one schema and decoded-frame layout."""

    keys: list[Column]
    aggregates: list[Column]
    selected: list[Column]


_newest_plans: ExpressionCache[_NewestPlan] = ExpressionCache()


def newest_filled(decoded: DataFrame, schema: TopicSchema) -> DataFrame:
    """Per primary key the change with the highest ``__pos``, unavailable columns filled from
    the key's older changes (see the module doc)."""
    columns = tuple(decoded.columns)
    plan = _newest_plans.get(schema, columns, lambda: _newest_plan(columns, schema))
    return decoded.groupBy(*plan.keys).agg(*plan.aggregates).select(*plan.selected)


def _newest_plan(
    decoded: tuple[str, ...], schema: TopicSchema, *, marking: bool = False
) -> _NewestPlan:
    """With ``marking``, ``decoded`` also has ``__error``: each rejected record is a group of
    its own (``__rejected`` true), passed on in ``selected``."""
    keys = [F.col(name) for name in schema.primary_key] or [F.col(KEY)]
    order = F.col(POS)
    if marking:
        rejected = F.col(ERROR).isNotNull()
        place = (F.when(rejected, F.col(c)).alias(f"__rejected{c}") for c in (PARTITION, OFFSET))
        keys += [rejected.alias(REJECTED), *place]
        order = F.coalesce(order, F.lit(""))  # a rejected record may have no position
        decoded = tuple(c for c in decoded if c != ERROR)
    fillable = [c.name for c in schema.columns if c.codec.may_be_unavailable]
    aggregates = [F.max_by(F.struct(*decoded), order).alias("newest")]
    for index, name in enumerate(fillable):
        available = (F.col(OP) == OP_UPSERT) & ~F.array_contains(UNAVAILABLE, name)
        at = F.when(available, F.col(POS))
        aggregates += [F.max_by(name, at).alias(f"__fill{index}"), F.max(at).alias(f"__at{index}")]
    missing = F.col(f"newest.{UNAVAILABLE}")
    filled = {
        name: F.when(
            F.array_contains(missing, name) & F.col(f"__at{i}").isNotNull(), F.col(f"__fill{i}")
        ).otherwise(F.col(f"newest.{name}"))
        for i, name in enumerate(fillable)
    }
    resolved = F.array_compact(
        F.array(*(F.when(F.col(f"__at{i}").isNotNull(), F.lit(n)) for i, n in enumerate(fillable)))
    )
    selected = [filled.get(n, F.col(f"newest.{n}")).alias(n) for n in decoded]
    if fillable:
        selected[decoded.index(UNAVAILABLE)] = F.array_except(missing, resolved).alias(UNAVAILABLE)
    if marking:
        selected.append(F.col(REJECTED))
    return _NewestPlan(keys, aggregates, selected)


REJECTED = "__rejected"
_marked_plans: ExpressionCache[_MarkedPlan] = ExpressionCache()


def marked_batch(decoded: Decoded, schema: TopicSchema, truncates: Sequence[Truncate]) -> DataFrame:
    """``batch_changes(records, schema, truncates=truncates, decoded=decoded)`` then
    ``marked_changes(schema)``, in one pass over ``decoded.all``: each rejected record is kept
    through the newest-per-key aggregation as a group of its own and comes out as its mark.
    The plan holds the decode once instead of once per branch of a union: for a small batch the
    driver read, planning (the optimizer decodes a local frame's records itself) and analysing
    the second branch cost more than the batch's jobs."""
    columns = tuple(c for c in decoded.all.columns if c != VALUE)
    plan = _marked_plans.get(schema, columns, lambda: _MarkedPlan.of(columns, schema))
    kept = decoded.all.where(
        plan.untruncated if not truncates else plan.rejected | plan.change & ~cleared_by(truncates)
    )
    grouped = plan.keys.aggregate(plan.columns.select_from(kept), plan.first, plan.aggregates)
    changes = (plan.truncated if truncates else plan.marks).select_from(
        plan.selected.select_from(grouped)
    )
    if not truncates:
        return changes
    return changes.unionByName(_truncate_marker(grouped.sparkSession, schema, truncates))


def _truncate_marker(
    spark: SparkSession, schema: TopicSchema, truncates: Sequence[Truncate]
) -> DataFrame:
    """The ``t`` row of a batch with known ``truncates``: null columns, at the newest one."""
    return spark.range(1).select(
        *(F.lit(None).cast(c.codec.spark).alias(c.name) for c in schema.columns),
        F.lit(OP_TRUNCATE).alias(OP),
        F.lit(max(t.pos for t in truncates)).alias(POS),
        F.lit(True).alias(TRUNCATED),
    )


@dataclass(frozen=True)
class _MarkedPlan:
    """``marked_batch``'s expressions for one schema and decoded-frame layout, handed to the
    JVM once (``ColumnList``)."""

    rejected: Column
    change: Column
    untruncated: Column
    columns: ColumnList
    keys: ColumnList
    first: Column
    aggregates: ColumnList
    selected: ColumnList
    marks: ColumnList
    truncated: ColumnList

    @classmethod
    def of(cls, columns: tuple[str, ...], schema: TopicSchema) -> _MarkedPlan:
        newest = _newest_plan(columns, schema, marking=True)
        rejected, change = F.col(ERROR).isNotNull(), F.col(OP) != OP_TRUNCATE
        marked = F.col(REJECTED)
        marks = [
            *(F.when(~marked, F.col(c.name)).alias(c.name) for c in schema.columns),
            F.when(marked, F.lit(OP_REJECTED)).otherwise(F.col(OP)).alias(OP),
            F.when(~marked, F.col(POS)).alias(POS),
        ]
        first, *aggregates = newest.aggregates
        return cls(
            rejected, change, rejected | change, ColumnList(columns), ColumnList(newest.keys),
            first, ColumnList(aggregates), ColumnList(newest.selected),
            ColumnList([*marks, F.lit(False).alias(TRUNCATED)]),
            ColumnList([*marks, (~marked).alias(TRUNCATED)]),
        )  # fmt: skip


def batch_changes(
    records: DataFrame,
    schema: TopicSchema,
    *,
    decode: Decoder = decode_native,
    cut: Bound | None = None,
    straddling: Sequence[str] = (),
    truncates: Sequence[Truncate] | None = None,
    decoded: Decoded | None = None,
) -> BatchChanges:
    """The newest change per key of a batch of raw records, cut at ``cut`` (a source-position
    bound) when given, without the transactions ``straddling`` names (see
    ``cut.cut_at``) (see the module doc). ``truncates``: the batch's truncates, when
    already found (``batches.find_truncates``; not with ``cut``): the batch then runs no job to
    find them. ``decoded``: ``records`` already decoded (and persisted) by the caller."""
    decoded = decoded or decode(records, schema, ())
    if truncates is not None and cut is None:
        return _with_known_truncates(decoded.good, decoded.bad, schema, truncates)
    good = decoded.good if cut is None else cut_at(decoded.good, cut, straddling)
    # Truncates are found among the few records that can be truncates, decoded on their own.
    candidates = decode(records.where(is_truncate_candidate(F.col("key"))), schema, ()).good
    if cut is not None:
        candidates = cut_at(candidates, cut, straddling)
    found = truncate_offsets(candidates)
    kept = after_truncates(good.where(F.col(OP) != OP_TRUNCATE), found)
    columns = [(c.name, c.codec.spark) for c in schema.columns]
    changes = flagged_truncated(newest_filled(kept, schema), found, columns)
    return BatchChanges(changes, found, decoded.bad)


def truncates_decoded(decoded: Decoded) -> list[Truncate]:
    """The truncates among a batch's decoded changes, as ``batches.find_truncates`` finds them
    (records keyed as truncates only); one Spark job, which fills the cache of a persisted
    ``decoded.all``."""
    truncate = (F.col(OP) == OP_TRUNCATE) & is_truncate_candidate(F.col(KEY))
    found = decoded.good.where(truncate).select(TOPIC, PARTITION, OFFSET, POS)
    return sorted(
        Truncate(r[POS], TopicPartition(r[TOPIC], r[PARTITION]), r[OFFSET]) for r in found.collect()
    )


def _with_known_truncates(
    good: DataFrame, bad: DataFrame, schema: TopicSchema, truncates: Sequence[Truncate]
) -> BatchChanges:
    """``batch_changes`` with the batch's truncates given: literal filters, no joins."""
    spark = good.sparkSession
    kept = after_known_truncates(good.where(F.col(OP) != OP_TRUNCATE), truncates)
    names = [c.name for c in schema.columns]
    changes = newest_filled(kept, schema).select(
        *names, OP, POS, F.lit(bool(truncates)).alias(TRUNCATED), UNAVAILABLE
    )
    last = {}
    for t in sorted(truncates, key=lambda t: (t.offset, t.pos)):
        last[t.tp] = (t.tp.topic, t.tp.partition, t.offset, t.pos)
    found = local_frame(spark, list(last.values()), TRUNCATES_SCHEMA)
    if not truncates:
        return BatchChanges(changes, found, bad)
    marker = _truncate_marker(spark, schema, truncates).withColumn(
        UNAVAILABLE, F.array().cast("array<string>")
    )
    return BatchChanges(changes.unionByName(marker), found, bad)
