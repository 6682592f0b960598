"""Truncates: a truncate event clears the table, so a replay drops what came before it.

A truncate lands in one partition of a changelog but clears the whole table: in its partition
it clears the changes at or before its offset, in the others those whose source position is
before it. ``truncate_offsets`` finds each partition's last truncate among decoded changes,
``after_truncates`` drops what they clear (a join), ``after_known_truncates`` the same for
truncates found beforehand (literal conditions), ``flagged_truncated`` marks a batch that holds
one. Truncate candidates (``is_truncate_candidate``:
a null record key, or the changelog's truncate key) are the only records that may be one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cdc.streams.protocol import TopicPartition
from replay.decode.changes import OFFSET, PARTITION, TOPIC, UNAVAILABLE
from replay.decode.position import STREAM_POSITION_CHARS, source_part
from replay.sinks.protocol import OP, OP_TRUNCATE, POS, TRUNCATED
from replay.spark import Column, DataFrame, F, T

TRUNCATE_KEYS = (b'{"schema":null,"payload":null}', b"null")
"""Record keys of the changelog's truncate events (schemas on, schemas off)."""
TRUNCATE_OFFSET, TRUNCATE_POS = "__truncate_offset", "__truncate_pos"
_TRUNCATE_SOURCE = "__truncate_source"
TRUNCATES_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField(TRUNCATE_OFFSET, T.LongType()),
        T.StructField(TRUNCATE_POS, T.StringType()),
    ]
)


@dataclass(frozen=True, order=True)
class Truncate:
    """A truncate event: its ``__pos`` (source part first), partition and offset."""

    pos: str
    tp: TopicPartition
    offset: int


def is_truncate_candidate(key: Column) -> Column:
    """Records that may be truncates: a null key, or the changelog's truncate key."""
    return key.isNull() | key.isin(*(F.lit(k) for k in TRUNCATE_KEYS))


def truncate_offsets(decoded: DataFrame) -> DataFrame:
    """Per (topic, partition) of decoded changes, the offset (and ``__pos``) of the last
    truncate."""
    truncates = decoded.where(F.col(OP) == OP_TRUNCATE)
    return truncates.groupBy(F.col(TOPIC).alias("topic"), F.col(PARTITION).alias("partition")).agg(
        F.max(OFFSET).alias(TRUNCATE_OFFSET), F.max(POS).alias(TRUNCATE_POS)
    )


def after_truncates(decoded: DataFrame, truncates: DataFrame) -> DataFrame:
    """The decoded changes that no truncate of ``truncates`` (``truncate_offsets``) clears.

    A truncate event lands in one partition but clears the whole table: in its partition it
    clears the changes at or before its offset, in the others those whose source position (the
    source part of ``__pos``) is before the topic's last truncate's. A change at the same source
    position in another partition is kept, and so is every change of a connector without source
    positions: stream positions of different partitions do not compare.
    """
    last = truncates.groupBy(F.col("topic").alias(TOPIC)).agg(
        F.max(source_part(F.col(TRUNCATE_POS))).alias(_TRUNCATE_SOURCE)
    )
    per_partition = truncates.select(
        F.col("topic").alias(TOPIC), F.col("partition").alias(PARTITION), TRUNCATE_OFFSET
    )
    cleared_here = F.col(OFFSET) <= F.col(TRUNCATE_OFFSET)
    cleared_elsewhere = (F.col(_TRUNCATE_SOURCE) != "") & (
        source_part(F.col(POS)) < F.col(_TRUNCATE_SOURCE)
    )
    return (
        decoded.join(F.broadcast(per_partition), [TOPIC, PARTITION], "left")
        .join(F.broadcast(last), [TOPIC], "left")
        .where(
            ~F.coalesce(cleared_here, F.lit(False)) & ~F.coalesce(cleared_elsewhere, F.lit(False))
        )
        .select(*decoded.columns)
    )


def after_known_truncates(decoded: DataFrame, truncates: Sequence[Truncate]) -> DataFrame:
    """``after_truncates`` for truncates found beforehand (``batches.find_truncates``): the
    same filter as literal conditions, so a batch runs no join and no broadcast job for it."""
    return decoded.where(~cleared_by(truncates))


def cleared_by(truncates: Sequence[Truncate]) -> Column:
    """True (never null) for the decoded changes that ``truncates`` clear (see
    ``after_known_truncates``)."""
    offsets: dict[TopicPartition, int] = {}
    sources: dict[str, str] = {}
    for tp in {t.tp for t in truncates}:
        mine = [t for t in truncates if t.tp == tp]
        offsets[tp] = max(t.offset for t in mine)
        source = max(t.pos for t in mine)[:-STREAM_POSITION_CHARS]  # as truncate_offsets does
        sources[tp.topic] = max(sources.get(tp.topic, ""), source)
    conditions = [
        (F.col(TOPIC) == tp.topic) & (F.col(PARTITION) == tp.partition) & (F.col(OFFSET) <= o)
        for tp, o in offsets.items()
    ]
    conditions += [
        (F.col(TOPIC) == topic) & (source_part(F.col(POS)) < F.lit(source))
        for topic, source in sources.items()
        if source
    ]
    cleared = F.lit(False)
    for condition in conditions:
        cleared = cleared | F.coalesce(condition, F.lit(False))
    return cleared


def flagged_truncated(
    newest: DataFrame, found: DataFrame, columns: Sequence[tuple[str, T.DataType]]
) -> DataFrame:
    """A batch's newest changes (``columns``, ``__op``, ``__pos``, ``__unavailable``) with
    ``__truncated``: whether ``found`` (``truncate_offsets``) holds a truncate, and then the
    batch's ``t`` row (null columns, at the newest truncate's ``__pos``), which tells a sink to
    clear the table before applying the batch even when no change follows the truncate."""
    last = found.agg(F.max(TRUNCATE_POS).alias(POS))
    flag = last.select(F.col(POS).isNotNull().alias(TRUNCATED))
    names = [name for name, _ in columns]
    changes = newest.crossJoin(flag).select(*names, OP, POS, TRUNCATED, UNAVAILABLE)
    marker = last.where(F.col(POS).isNotNull()).select(
        *(F.lit(None).cast(kind).alias(name) for name, kind in columns),
        F.lit(OP_TRUNCATE).alias(OP),
        POS,
        F.lit(True).alias(TRUNCATED),
        F.array().cast("array<string>").alias(UNAVAILABLE),
    )
    return changes.unionByName(marker)
