"""Cutting a catch-up plan into merge batches, never splitting a truncate across partitions.

A sink applies a batch's truncate to the whole table, then the batch's rows. This product's
changelog writes a truncate on every partition (one source position, followed by a delete of
every row); a batch holding one partition's truncate but not another's would clear rows the
other partitions wrote after their truncate in earlier batches, and keep rows they wrote before
it. So the truncates sharing a source position form a group, and a batch boundary falls right
before every group: each partition of the group stops at its truncate, the ones that got there
waiting (empty ranges) while the others catch up, and the next batch holds the whole group.
Truncates without a source position (stream order only) are each a group of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cdc.streams.protocol import TopicPartition
from replay.compaction import is_truncate_candidate
from replay.decode import OFFSET, PARTITION, decode_native
from replay.decode_schema import TopicSchema
from replay.plan import PartitionRange, ReplayPlan
from replay.sinks.protocol import OP, OP_TRUNCATE, POS
from replay.sources import read_records
from replay.spark import F, SparkSession

_STREAM_POSITION_CHARS = 30
"""The stream part that ends every ``__pos``: ``dec10(partition) || dec20(offset)``."""


@dataclass(frozen=True, order=True)
class Truncate:
    """A truncate event: its ``__pos`` (source part first), partition and offset."""

    pos: str
    tp: TopicPartition
    offset: int


def find_truncates(
    spark: SparkSession, stream_url: str, plan: ReplayPlan, schema: TopicSchema
) -> list[Truncate]:
    """The truncates in the plan's ranges (only records that can be truncates are decoded)."""
    records = read_records(spark, stream_url, plan)
    candidates = records.where(is_truncate_candidate(F.col("key")))
    found = decode_native(candidates, schema).good.where(F.col(OP) == OP_TRUNCATE)
    topic = plan.ranges[0].tp.topic if plan.ranges else ""
    rows = found.select(PARTITION, OFFSET, POS).collect()
    return sorted(Truncate(r[POS], TopicPartition(topic, r[PARTITION]), r[OFFSET]) for r in rows)


def truncate_groups(truncates: Sequence[Truncate]) -> list[dict[TopicPartition, int]]:
    """Per group (same source position), the offset of its truncate in each partition; in
    source order (stream order for truncates without a source position)."""
    groups: dict[str, dict[TopicPartition, int]] = {}
    for t in sorted(truncates):
        source = t.pos[:-_STREAM_POSITION_CHARS]
        group = groups.setdefault(source or t.pos, {})
        group.setdefault(t.tp, t.offset)
    return list(groups.values())


def cut_batches(
    plan: ReplayPlan, batch_offsets: int, truncates: Sequence[Truncate] = ()
) -> list[ReplayPlan]:
    """The plan cut into consecutive batches of about ``batch_offsets`` offsets in total, each
    carrying the positions of all partitions (finished ones at their stop), with a boundary
    right before every truncate group (see the module doc)."""
    per_partition = max(1, batch_offsets // max(1, len(plan.ranges)))
    stops = {r.tp: r.stop for r in plan.ranges}
    cursor = {r.tp: r.start for r in plan.ranges}
    pending = [
        {tp: min(offset, stops[tp]) for tp, offset in group.items() if tp in stops}
        for group in truncate_groups(truncates)
    ]
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
