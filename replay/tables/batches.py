"""Cutting a catch-up plan into merge batches, never splitting a truncate across partitions.

A sink applies a batch's truncate to the whole table, then the batch's rows. This product's
changelog writes a truncate on every partition (one source position, followed by a delete of
every row); a batch holding one partition's truncate but not another's would clear rows the
other partitions wrote after their truncate in earlier batches, and keep rows they wrote before
it. So the truncates sharing a source position form a group, and a batch boundary falls right
before every group: each partition of the group stops at its truncate, the ones that got there
waiting (empty ranges) while the others catch up, and the next batch holds the whole group.
Truncates without a source position (stream order only) are each a group of their own.

Debezium writes a truncate to one partition only (null key). A partition without it stops at
its first offset at or past the truncate's source position (``source_reach``; its stop when
none is): the changes before stay in earlier batches or the truncate's, which clears them
(``truncates.after_truncates``), the ones after go to the truncate's batch or later ones.
Within a partition, source positions are taken to grow with offsets (one connector task writes
in commit order); a change redelivered out of order after the truncate's batch is not cleared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cdc.streams.protocol import TopicPartition
from replay.decode.changes import OFFSET, PARTITION, decode_native
from replay.decode.position import STREAM_POSITION_CHARS, source_position
from replay.decode.schema import SOURCE_TYPE, TopicSchema
from replay.decode.truncates import TRUNCATE_KEYS, Truncate, is_truncate_candidate
from replay.reading.plan import PartitionRange, ReplayPlan
from replay.reading.sources import driver_rows, read_records
from replay.sinks.protocol import OP, OP_TRUNCATE, POS
from replay.spark import F, SparkSession, T

_SOURCE_ONLY = T.StructType(
    [
        T.StructField("payload", T.StructType([T.StructField("source", SOURCE_TYPE)])),
        T.StructField("source", SOURCE_TYPE),
    ]
)
"""A change record's value read for its ``source`` alone (with or without the schema wrapper)."""

Reach = Mapping[str, Mapping[TopicPartition, int]]
"""Per source position of a truncate group, where each partition without it stops."""


def truncates_in(truncates: Sequence[Truncate], plan: ReplayPlan) -> list[Truncate]:
    """The ``truncates`` that lie in the plan's ranges."""
    ranges = {r.tp: r for r in plan.ranges}
    return [
        t
        for t in truncates
        if t.tp in ranges and ranges[t.tp].start <= t.offset < ranges[t.tp].stop
    ]


def find_truncates(
    spark: SparkSession, stream_url: str, plan: ReplayPlan, schema: TopicSchema
) -> list[Truncate]:
    """The truncates in the plan's ranges (only records that can be truncates are decoded)."""
    local = driver_rows(stream_url, plan)  # a small plan's records are at hand: no Spark job
    if local is not None and not any(r[3] is None or r[3] in TRUNCATE_KEYS for r in local):
        return []
    records = read_records(spark, stream_url, plan, cut_prefix=schema.value_prefix)
    candidates = records.where(is_truncate_candidate(F.col("key")))
    found = decode_native(candidates, schema).good.where(F.col(OP) == OP_TRUNCATE)
    topic = plan.ranges[0].tp.topic if plan.ranges else ""
    rows = found.select(PARTITION, OFFSET, POS).collect()
    return sorted(Truncate(r[POS], TopicPartition(topic, r[PARTITION]), r[OFFSET]) for r in rows)


def _grouped(truncates: Sequence[Truncate]) -> dict[str, dict[TopicPartition, int]]:
    """The groups of ``truncate_groups`` by source position (``~`` and the ``__pos`` of the
    truncate for one without a source position: it never equals a source position)."""
    groups: dict[str, dict[TopicPartition, int]] = {}
    for t in sorted(truncates):
        source = t.pos[:-STREAM_POSITION_CHARS]
        group = groups.setdefault(source or f"~{t.pos}", {})
        group.setdefault(t.tp, t.offset)
    return groups


def truncate_groups(truncates: Sequence[Truncate]) -> list[dict[TopicPartition, int]]:
    """Per group (same source position), the offset of its truncate in each partition; in
    source order (stream order for truncates without a source position)."""
    return list(_grouped(truncates).values())


def source_reach(
    spark: SparkSession, stream_url: str, plan: ReplayPlan, schema: TopicSchema,
    truncates: Sequence[Truncate],
) -> dict[str, dict[TopicPartition, int]]:  # fmt: skip
    """For every truncate group with a source position that lacks partitions of the plan, the
    first offset of each such partition at or past that position (its stop when none is). One
    pass over the plan's records that reads only their ``source`` (and only when needed)."""
    partitions = {r.tp: r.stop for r in plan.ranges}
    wanted = {
        source: group
        for source, group in _grouped(truncates).items()
        if not source.startswith("~") and not set(partitions) <= set(group)
    }
    if not wanted:
        return {}
    records = read_records(spark, stream_url, plan)
    parsed = F.from_json(F.col("value").cast("string"), _SOURCE_ONLY)
    source = F.coalesce(parsed["payload"]["source"], parsed["source"])
    changes = records.where(F.col("value").isNotNull() & ~is_truncate_candidate(F.col("key")))
    positioned = changes.select(
        "partition", "offset", source_position(source, schema.connector).alias("source")
    ).where(F.col("source").isNotNull())
    firsts = [
        F.min(F.when(F.col("source") >= F.lit(s), F.col("offset"))).alias(f"g{i}")
        for i, s in enumerate(wanted)
    ]
    found = {r["partition"]: r for r in positioned.groupBy("partition").agg(*firsts).collect()}
    reach: dict[str, dict[TopicPartition, int]] = {}
    for i, (s, group) in enumerate(wanted.items()):
        reach[s] = {}
        for tp, stop in partitions.items():
            if tp not in group:
                first = found[tp.partition][f"g{i}"] if tp.partition in found else None
                reach[s][tp] = stop if first is None else first
    return reach


def cut_batches(
    plan: ReplayPlan,
    batch_offsets: int,
    truncates: Sequence[Truncate] = (),
    reach: Reach | None = None,
) -> list[ReplayPlan]:
    """The plan cut into consecutive batches of about ``batch_offsets`` offsets in total, each
    carrying the positions of all partitions (finished ones at their stop), with a boundary
    right before every truncate group, in the partitions without it where ``reach`` (from
    ``source_reach``) says (see the module doc)."""
    per_partition = max(1, batch_offsets // max(1, len(plan.ranges)))
    stops = {r.tp: r.stop for r in plan.ranges}
    cursor = {r.tp: r.start for r in plan.ranges}
    pending = [
        {tp: min(offset, stops[tp]) for tp, offset in {**(reach or {}).get(s, {}), **group}.items()
         if tp in stops}
        for s, group in _grouped(truncates).items()
    ]  # fmt: skip
    batches = []
    while any(cursor[r.tp] < r.stop for r in plan.ranges):
        while pending and all(cursor[tp] >= offset for tp, offset in pending[0].items()):
            pending.pop(0)  # every partition stands at its truncate: the next batch holds them
        limits = pending[0] if pending else {}
        ranges = []
        for r in plan.ranges:
            limit = max(cursor[r.tp], limits.get(r.tp, r.stop))
            end = min(r.stop, cursor[r.tp] + per_partition, limit)
            ranges.append(PartitionRange(r.tp, cursor[r.tp], end, r.log_start, r.log_end))
            cursor[r.tp] = end
        batches.append(ReplayPlan(tuple(ranges), (), plan.stop))
    return batches
