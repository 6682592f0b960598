"""Whole source transactions at the tail of a replay: plans cut back before transactions whose
END or events have not all arrived (the rule is in :mod:`replay.reading.open_transactions`).

The metadata topic of a change topic ``a.b.c`` is the longest existing ``a.b.transaction`` or
``a.transaction``: Debezium's ``<topic.prefix>.transaction`` (with
``provide.transaction.metadata=true``; its ``data_collection`` is ``schema.table``, the topic
without the prefix) or this product's ``<processor>.transaction`` (``data_collection``: the
topic). Topics without one are applied event by event, as they arrive.

A stop at given offsets or times (``--until topic:partition:offset`` or an ISO time) is kept
exactly: the user named those positions; a source-position cut (``lsn:``/``binlog:``/``txn:``)
keeps whole transactions by its own rule and is held at the tail as ``latest`` is.

Only the tail is read: per partition, the events of the plan from the settle window before the
newest metadata record on (all of a catch-up's), and the metadata from the oldest of those events
on; a rebuild of a long topic reads a few minutes of it, not all of it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from cdc.streams.protocol import EventStream, TopicPartition
from replay.reading.bounds import Bound, BoundKind
from replay.reading.open_transactions import Ending, TransactionPart, hold_back
from replay.reading.plan import PartitionRange, ReplayPlan
from replay.reading.sources import read_records
from replay.spark import Column, F, SparkSession

_CLOCK_MARGIN_MS = 5_000
"""Record timestamps are the producer's: allow this much disorder between a connector's
events and its END."""


@dataclass(frozen=True)
class TransactionTail:
    """The plans of a job with whole transactions only, and what was held back."""

    plans: Mapping[str, ReplayPlan]
    metadata: Mapping[str, str]
    """Per change topic, its transaction metadata topic (topics without one are absent)."""
    held: int = 0
    held_offsets: int = 0
    oldest_held_ms: int | None = None
    per_event: bool = False
    """The user chose to apply events one by one (``--per-event``)."""
    exact_stop: bool = False
    """The plans stop at given offsets or times, kept exactly."""

    def held_seconds(self, now_ms: int | None = None) -> float:
        """How long the oldest held event has waited (0 when nothing is held)."""
        if self.oldest_held_ms is None:
            return 0.0
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return max(0.0, (now - self.oldest_held_ms) / 1000)

    def summary(self) -> str:
        """One line: what is held back, or nothing when all is applied."""
        if not self.held:
            return ""
        return (
            f"holding {self.held} source transaction(s) back ({self.held_offsets:,} offsets, "
            f"oldest event {self.held_seconds():.1f}s old): their END or some of their events "
            "have not arrived yet"
        )

    def render(self) -> str:
        """The rule applied to each topic, for ``--dry-run``."""
        if self.per_event:
            return "--per-event: events are applied one by one, as they arrive"
        if self.exact_stop:
            return "the stop is at given offsets or a time: applied up to exactly there"
        lines = []
        for topic in self.plans:
            meta = self.metadata.get(topic)
            lines.append(
                f"{topic}: whole source transactions (metadata topic {meta})"
                if meta
                else f"{topic}: no transaction metadata topic: events are applied one by one"
            )
        return "\n".join(lines + ([self.summary()] if self.held else []))


def metadata_topic(topic: str, available: Sequence[str]) -> str | None:
    """The transaction metadata topic of ``topic`` among ``available`` (see the module doc)."""
    parts = topic.split(".")
    for size in range(len(parts) - 1, 0, -1):
        candidate = ".".join(parts[:size]) + ".transaction"
        if candidate in available and candidate != topic:
            return candidate
    return None


def hold_open_transactions(
    spark: SparkSession, stream: EventStream, plans: Mapping[str, ReplayPlan], settle_s: float
) -> TransactionTail:
    """``plans`` with every partition stopped before transactions not whole yet; plans that
    stop at given offsets or times are kept as they are (the user named those positions)."""
    if any(p.stop.kind in (BoundKind.OFFSETS, BoundKind.TIMESTAMP) for p in plans.values()):
        return TransactionTail(plans, {}, exact_stop=True)
    available = stream.topics()
    metadata = {t: m for t in plans if (m := metadata_topic(t, available)) is not None}
    tail = TransactionTail(plans, metadata)
    if not metadata:
        return tail
    times = [t for m in set(metadata.values()) if (t := _newest_ms(stream, m)) is not None]
    if not times:
        return tail  # the metadata topics hold nothing: no transaction can be judged
    settled_before = max(times) - int(settle_s * 1000)
    ranges = [
        _tail_range(stream, r, settled_before - _CLOCK_MARGIN_MS)
        for topic in metadata
        for r in plans[topic].ranges
    ]
    parts = [
        replace(p, txn=transaction_key(metadata[p.tp.topic], p.txn))
        for p in _transaction_parts(spark, stream.url, ranges)
    ]
    if not parts:
        return tail
    since = min(p.first_ms for p in parts) - _CLOCK_MARGIN_MS
    endings = _endings(spark, stream, metadata, since)
    stops = {r.tp: r.stop for plan in plans.values() for r in plan.ranges}
    holding = hold_back(parts, endings, stops, settled_before)
    if not holding.held:
        return tail
    cut = {
        topic: replace(plan, ranges=tuple(_stop_at(r, holding.stops) for r in plan.ranges))
        for topic, plan in plans.items()
    }
    held_parts = [p for p in parts if p.txn in holding.held]
    return TransactionTail(
        cut, metadata, held=len(holding.held),
        held_offsets=sum(stops[tp] - stop for tp, stop in holding.stops.items()),
        oldest_held_ms=min((p.first_ms for p in held_parts), default=None),
    )  # fmt: skip


def _stop_at(r: PartitionRange, stops: Mapping[TopicPartition, int]) -> PartitionRange:
    stop = stops.get(r.tp)
    return r if stop is None else replace(r, stop=max(r.start, min(r.stop, stop)))


def _newest_ms(stream: EventStream, topic: str) -> int | None:
    newest = None
    for partition in range(stream.partition_count(topic)):
        bounds = stream.bounds(topic, partition)
        for record in stream.read(topic, partition, max(bounds.log_start, bounds.end - 16)):
            newest = max(newest or record.timestamp_ms, record.timestamp_ms)
    return newest


def _tail_range(stream: EventStream, r: PartitionRange, since_ms: int) -> PartitionRange:
    """``r`` from the first event at or after ``since_ms`` (all of it when it starts later)."""
    if r.span == 0:
        return r
    first = stream.offset_for_time(r.tp.topic, r.tp.partition, since_ms)
    return replace(r, start=min(r.stop, max(r.start, first)))


def _transaction_parts(
    spark: SparkSession, stream_url: str, ranges: Sequence[PartitionRange]
) -> list[TransactionPart]:
    plan = ReplayPlan(tuple(ranges), (), Bound(BoundKind.LATEST))
    if plan.span == 0:
        return []
    value = F.col("value").cast("string")
    txn = F.coalesce(
        F.get_json_object(value, "$.payload.transaction.id"),
        F.get_json_object(value, "$.transaction.id"),
    )
    rows = (
        read_records(spark, stream_url, plan)
        .where(F.col("value").isNotNull())
        .select("topic", "partition", "offset", "timestamp_ms", txn.alias("txn"))
        .where(F.col("txn").isNotNull())
        .groupBy("txn", "topic", "partition")
        .agg(
            F.count("*").alias("events"),
            F.min("offset").alias("first"),
            F.max("offset").alias("last"),
            F.min("timestamp_ms").alias("first_ms"),
        )
        .collect()
    )
    return [
        TransactionPart(
            r["txn"],
            TopicPartition(r["topic"], r["partition"]),
            r["events"],
            r["first"],
            r["last"],
            r["first_ms"],
        )
        for r in rows
    ]


def _endings(
    spark: SparkSession, stream: EventStream, metadata: Mapping[str, str], since_ms: int
) -> dict[str, Ending]:
    """BEGIN/END of the metadata topics from ``since_ms`` on, counts keyed by change topic."""
    ranges = []
    for meta in sorted(set(metadata.values())):
        for partition in range(stream.partition_count(meta)):
            bounds = stream.bounds(meta, partition)
            first = max(bounds.log_start, stream.offset_for_time(meta, partition, since_ms))
            tp = TopicPartition(meta, partition)
            ranges.append(PartitionRange(tp, first, bounds.end, bounds.log_start, bounds.end))
    plan = ReplayPlan(tuple(ranges), (), Bound(BoundKind.LATEST))
    value = F.col("value").cast("string")

    def field(name: str) -> Column:
        return F.coalesce(
            F.get_json_object(value, f"$.payload.{name}"), F.get_json_object(value, f"$.{name}")
        ).alias(name)

    rows = (
        read_records(spark, stream.url, plan)
        .where(F.col("value").isNotNull())
        .select("topic", "timestamp_ms", field("status"), field("id"), field("data_collections"))
        .collect()
    )
    topics_of = {(meta, _collection(meta, topic)): topic for topic, meta in metadata.items()}
    topics_of |= {(meta, topic): topic for topic, meta in metadata.items()}
    endings: dict[str, Ending] = {}
    for row in sorted(rows, key=lambda r: r["timestamp_ms"]):
        if row["id"] is None or row["status"] not in ("BEGIN", "END"):
            continue
        txn = transaction_key(row["topic"], row["id"])
        if row["status"] == "BEGIN":
            if txn not in endings:
                endings[txn] = Ending(None, row["timestamp_ms"])
            continue
        counts: dict[str, int] = {}
        for entry in json.loads(row["data_collections"] or "[]"):
            topic = topics_of.get((row["topic"], entry.get("data_collection")))
            if topic is not None:
                counts[topic] = counts.get(topic, 0) + int(entry.get("event_count") or 0)
        endings[txn] = Ending(counts, row["timestamp_ms"])
    return endings


def transaction_key(meta: str, txn_id: str) -> str:
    """The id that ties a transaction's events to its BEGIN/END from ``meta``: PostgreSQL's
    ``<txId>:<LSN>`` differ in the LSN (the events and BEGIN carry the begin LSN, the END the
    commit LSN), so its ``txId``; this product's ``<processor>:<seq>`` and others as they are."""
    head, sep, tail = txn_id.partition(":")
    if sep and head.isdigit() and tail.isdigit() and head != meta.removesuffix(".transaction"):
        return head
    return txn_id


def _collection(meta: str, topic: str) -> str:
    """Debezium's ``data_collection`` of ``topic``: the topic without the metadata's prefix."""
    prefix = meta.removesuffix("transaction")
    return topic.removeprefix(prefix)
