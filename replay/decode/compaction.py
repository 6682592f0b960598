"""Full rebuilds from compacted change records: the newest image of every key, decoding only it.

A full rebuild needs, per key, only the newest record: ``newest_offsets`` finds it from keys,
offsets and null-ness alone, before any value is decoded, with a hash aggregation of fixed-width
columns, then ``latest_records`` fetches only the winners' values from a second read (by a
broadcast join when ``broadcasts_winners`` says the driver can hold them); the one-read
compaction of ``compacted_read`` gives the same rows. Truncate candidates (records whose key is
null or is the changelog's truncate key) are kept one by one. ``decoded_latest`` decodes every
kept value in one pass (persist it: the rows and the bad records both read it);
``rebuild_table`` then finds the truncates among the candidates, drops per partition every
record at or before the partition's last truncate, drops keys whose newest record is a
tombstone, drops those a truncate in another partition clears (``after_truncates``), keeps per
primary key the image with the highest ``__pos`` (a key may survive in several partitions after
a repartitioning), and drops deletes. When ``survey`` finds no record that may be a truncate,
``rebuild_table(..., candidates=False)`` leaves out the truncate jobs and joins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cdc.streams.protocol import TopicPartition
from replay.decode.changes import (
    ERROR,
    OFFSET,
    PARTITION,
    SOURCE,
    TOPIC,
    TXN,
    UNAVAILABLE,
    Decoded,
    Decoder,
    decode_native,
)
from replay.decode.position import STREAM_POSITION_CHARS, source_part
from replay.decode.repeated_keys import newest_per_key
from replay.decode.schema import TopicSchema
from replay.sinks.protocol import OP, OP_TRUNCATE, OP_UPSERT, POS
from replay.spark import Column, DataFrame, F, SparkSession, T, driver_heap_bytes

TRUNCATE_KEYS = (b'{"schema":null,"payload":null}', b"null")
"""Record keys of the changelog's truncate events (schemas on, schemas off)."""
CANDIDATE, TOMBSTONED = "__candidate", "__tombstoned"
TRUNCATE_OFFSET, TRUNCATE_POS = "__truncate_offset", "__truncate_pos"
LIVE_OFFSET, LIVE_VALUE = "__live_offset", "__live_value"
_TRUNCATE_SOURCE = "__truncate_source"
TRUNCATES_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField(TRUNCATE_OFFSET, T.LongType()),
        T.StructField(TRUNCATE_POS, T.StringType()),
    ]
)


class OverBudget(MemoryError):
    """A compaction task's newest values outgrew its budget (``compacted_read``, which mypyc
    compiles and so cannot define a ``MemoryError`` of its own)."""


@dataclass(frozen=True, order=True)
class Truncate:
    """A truncate event: its ``__pos`` (source part first), partition and offset."""

    pos: str
    tp: TopicPartition
    offset: int


def is_truncate_candidate(key: Column) -> Column:
    """Records that may be truncates: a null key, or the changelog's truncate key."""
    return key.isNull() | key.isin(*(F.lit(k) for k in TRUNCATE_KEYS))


WINNER_BROADCAST_BYTES = 1024
"""Driver heap to allow per broadcast winner (its row collected, then hashed, with headroom):
above ``driver_heap_bytes / WINNER_BROADCAST_BYTES`` winners, ``latest_records`` joins by
shuffled hash instead (a 4 GB driver broadcasts up to ~4 M keys)."""


def newest_offsets(records: DataFrame) -> DataFrame:
    """Per (topic, partition, key) the newest offset, its timestamp and the newest
    non-tombstone's offset (``__live_offset``); truncate candidates each on their own.

    A hash aggregation of fixed-width columns: no value goes through it (an aggregation over
    variable-length values sorts them all, spilling at scale)."""
    candidate = F.when(is_truncate_candidate(F.col("key")), F.col("offset"))
    live_offset = F.when(F.col("value").isNotNull(), F.col("offset"))
    return (
        records.select("topic", "partition", "key", "offset", "timestamp_ms",
                       live_offset.alias(LIVE_OFFSET), candidate.alias(CANDIDATE))
        .groupBy("topic", "partition", "key", CANDIDATE)
        .agg(F.max("offset").alias("offset"), F.max_by("timestamp_ms", "offset").alias(
            "timestamp_ms"), F.max(LIVE_OFFSET).alias(LIVE_OFFSET))
    )  # fmt: skip


def latest_records(
    records: DataFrame, newest: DataFrame | None = None, *, broadcast: bool = True
) -> DataFrame:
    """Per (topic, partition, key) the newest record by offset, plus the newest non-tombstone
    (``__live_offset``/``__live_value``); truncate candidates are kept each on its own.

    Two passes: ``newest`` (``newest_offsets(records)``, computed here when not given) finds
    each key's newest offsets, then a second read of ``records`` fetches just the newest live
    values (and their keys), joined on (topic, partition, offset) against the winners' offsets:
    broadcast (about 60 bytes a key, no shuffle of values) or, when ``broadcast`` is False for
    more keys than the driver can hold, a shuffled hash join (values are shuffled, not sorted).
    ``value`` is a truncate candidate's own; a keyed row carries its value once, as
    ``__live_value`` (null ``value``; its newest record is a tombstone where ``offset`` is not
    ``__live_offset``). A live record that compaction removes between the two reads leaves its
    key with only its tombstone, i.e. deleted, which is what the compacted log then says too.
    """
    marks = newest_offsets(records) if newest is None else newest
    live_values = records.select(
        "topic", "partition", "key", F.col("offset").alias(LIVE_OFFSET),
        F.col("value").alias(LIVE_VALUE),
    )  # fmt: skip
    place = ["topic", "partition", LIVE_OFFSET]
    winners = marks.where(F.col(LIVE_OFFSET).isNotNull()).drop("key")
    winners = F.broadcast(winners) if broadcast else winners.hint("shuffle_hash")
    found = live_values.join(winners, place)
    gone = marks.where(F.col(LIVE_OFFSET).isNull()).withColumn(
        LIVE_VALUE, F.lit(None).cast(T.BinaryType())
    )
    own = F.col(CANDIDATE).isNotNull() & (F.col(LIVE_OFFSET) == F.col("offset"))
    newest_value = F.when(own, F.col(LIVE_VALUE))
    return found.unionByName(gone).select(
        "topic", "partition", "key", CANDIDATE, "offset", newest_value.alias("value"),
        "timestamp_ms", LIVE_OFFSET, LIVE_VALUE,
    )  # fmt: skip


def broadcasts_winners(spark: SparkSession, newest: DataFrame) -> bool:
    """Whether ``latest_records`` may broadcast the winners of ``newest`` (``newest_offsets``;
    a Spark job: persist it first) on this driver."""
    return newest.count() <= driver_heap_bytes(spark) // WINNER_BROADCAST_BYTES


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


@dataclass(frozen=True)
class Rebuild:
    """A rebuilt table: the truncates seen (topic, partition, ``__truncate_offset``), the bad
    records (``decode.BAD_COLUMNS``) and ``rows()``; ``rows()`` and ``bad`` both read
    ``decoded`` (``decoded_latest`` output, persisted by the caller)."""

    changes: DataFrame
    truncates: DataFrame
    bad: DataFrame
    decoded: DataFrame
    schema: TopicSchema

    def rows(self) -> DataFrame:
        """The table's rows (its columns, ``__pos``, ``__unavailable``): the newest live image
        of every key. Runs ``newest_per_key``'s Spark job at each call."""
        winners = newest_per_key(self.changes, self.schema)
        live = winners.where(_live())
        return live.select(*(c.name for c in self.schema.columns), POS, UNAVAILABLE)

    def lacks_values(self) -> bool:
        """Whether a live image the compaction kept lacks a column Debezium could not read
        (unchanged TOAST): its value is in an older record, which compaction dropped (a Spark
        job; an image of a key kept in several partitions counts even if not the newest)."""
        return bool(self.changes.where(_live() & (F.size(UNAVAILABLE) > 0)).limit(1).count())


def _live() -> Column:
    """A decoded survivor that is an upsert with no tombstone after it."""
    return (F.col(OP) == OP_UPSERT) & ~F.col(TOMBSTONED)


def decoded_latest(
    latest: DataFrame, schema: TopicSchema, decode: Decoder = decode_native
) -> DataFrame:
    """Every record of ``latest_records`` output that holds a value, decoded in one pass: each
    key's newest live image (``__tombstoned`` if a tombstone came after it) and the truncate
    candidates (``__candidate`` true), as ``Decoded.all`` without ``__source`` and ``__txn``
    (unread by a rebuild: less to copy into the persisted decode). Persist it."""
    survivors = latest.where(F.col(LIVE_OFFSET).isNotNull()).select(
        "topic", "partition", F.col(LIVE_OFFSET).alias("offset"), "key",
        F.col(LIVE_VALUE).alias("value"), "timestamp_ms",
        (F.col("offset") != F.col(LIVE_OFFSET)).alias(TOMBSTONED),
        F.col(CANDIDATE).isNotNull().alias(CANDIDATE),
    )  # fmt: skip
    return decode(survivors, schema, (TOMBSTONED, CANDIDATE)).all.drop(SOURCE, TXN)


def survey(decoded: DataFrame) -> tuple[bool, bool]:
    """Whether ``decoded_latest`` output holds a record that may be a truncate, and a keyed live
    image that may lack a value (``Rebuild.lacks_values`` then says for sure): one Spark job."""
    lacking = ~F.col(CANDIDATE) & _live() & (F.size(UNAVAILABLE) > 0)
    row = decoded.agg(F.bool_or(CANDIDATE), F.bool_or(lacking)).first()
    return (bool(row[0]), bool(row[1])) if row else (False, False)


def rebuild_table(decoded: DataFrame, schema: TopicSchema, *, candidates: bool = True) -> Rebuild:
    """The final image of every live key from ``decoded_latest`` output (see the module doc);
    ``candidates=False`` when ``survey`` finds no truncate candidate: no truncate to look for."""
    keyed = decoded.where(~F.col(CANDIDATE)).drop(CANDIDATE)
    if candidates:
        found = Decoded(decoded.where(F.col(CANDIDATE)).drop(CANDIDATE, TOMBSTONED), schema)
        unkeyed = found.all.where(F.col(ERROR).isNotNull() | (F.col(OP) != OP_TRUNCATE))
        unkeyed = unkeyed.withColumn(
            ERROR, F.coalesce(F.col(ERROR), F.lit("a change without a record key"))
        )
        truncates = truncate_offsets(found.good)
        # A record at or before its partition's last truncate is neither a row nor a bad record.
        here = truncates.select(
            F.col("topic").alias(TOPIC), F.col("partition").alias(PARTITION), TRUNCATE_OFFSET
        )
        keyed = (
            keyed.join(F.broadcast(here), [TOPIC, PARTITION], "left")
            .where(F.col(TRUNCATE_OFFSET).isNull() | (F.col(OFFSET) > F.col(TRUNCATE_OFFSET)))
            .select(*keyed.columns)
        )
    survivors = Decoded(keyed, schema)
    changes, bad = survivors.good.where(F.col(OP) != OP_TRUNCATE), survivors.bad
    if candidates:
        changes = after_truncates(changes, truncates)
        bad = Decoded(unkeyed, schema).bad.unionByName(bad)
    else:
        # No truncates, planned on the JVM (createDataFrame of an empty list costs 0.35 s cold).
        truncates = decoded.limit(0).select(
            F.col(TOPIC).alias("topic"), F.col(PARTITION).alias("partition"),
            F.lit(None).cast(T.LongType()).alias(TRUNCATE_OFFSET),
            F.lit(None).cast(T.StringType()).alias(TRUNCATE_POS),
        )  # fmt: skip
    return Rebuild(changes, truncates, bad, decoded, schema)
