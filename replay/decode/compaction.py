"""Full rebuilds from compacted change records: the newest image of every key, decoding only it.

A full rebuild needs, per key, only the newest record: ``newest_offsets`` finds it from keys,
offsets and null-ness alone (a hash aggregation of fixed-width columns), then ``latest_records``
fetches only the winners' values from a second read (a broadcast join when
``broadcasts_winners`` allows); ``compacted_read``'s one-read compaction gives the same rows.
Truncate candidates (a null key or the changelog's truncate key) are kept one by one.
``decoded_latest`` decodes every kept value in one pass (persist it); ``rebuild_table`` then
drops per partition every record at or before its last truncate, keys whose newest record is a
tombstone, those a truncate in another partition clears (``after_truncates``), keeps per primary
key the image with the highest ``__pos`` (a key may survive in several partitions after a
repartitioning), and drops deletes, leaving out what ``survey`` found unneeded: the truncate
joins, the bad records, the pick per primary key (as many keys as changes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

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
from replay.decode.repeated_keys import key_counts, newest_per_key
from replay.decode.schema import TopicSchema
from replay.decode.truncates import (
    TRUNCATE_OFFSET,
    TRUNCATE_POS,
    after_truncates,
    is_truncate_candidate,
    truncate_offsets,
)
from replay.sinks.protocol import OP, OP_DELETE, OP_TRUNCATE, OP_UPSERT, POS, WriteBounds
from replay.spark import Column, DataFrame, F, SparkSession, T, driver_heap_bytes, named_column

CANDIDATE, TOMBSTONED = "__candidate", "__tombstoned"
LIVE_OFFSET, LIVE_VALUE = "__live_offset", "__live_value"


class OverBudget(MemoryError):
    """A compaction task's newest values outgrew its budget (``compacted_read``, which mypyc
    compiles and so cannot define a ``MemoryError`` of its own)."""


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
    gone = marks.where(F.col(LIVE_OFFSET).isNull())
    gone = gone.withColumn(LIVE_VALUE, F.lit(None).cast(T.BinaryType()))
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


@dataclass(frozen=True)
class Rebuild:
    """A rebuilt table: the truncates seen (topic, partition, ``__truncate_offset``), the bad
    records (``decode.BAD_COLUMNS``) and ``rows()``, both reading the ``decoded_latest`` output
    it was rebuilt from (persisted by the caller); ``found``: the decode's survey."""

    changes: DataFrame
    truncates: DataFrame
    bad: DataFrame
    schema: TopicSchema
    found: Survey | None = None

    def bounds(self, rows_at_most: int) -> WriteBounds:
        """The sink's bounds on ``rows()`` (``Sink.replace``), given another on its rows."""
        found = self.found or ANYTHING
        return write_bounds(rows_at_most, found.live, found.live_bytes)

    def rows(self) -> DataFrame:
        """The table's rows (its columns, ``__pos``, ``__unavailable``): the newest live image
        of every key. Runs ``newest_per_key``'s Spark job at each call, unless the survey found
        no repeated key."""
        live = self._winners().where(is_live())
        return live.select(*(c.name for c in self.schema.columns), POS, UNAVAILABLE)

    def newest(self) -> DataFrame:
        """The newest change of every key (its columns, ``__op``, ``__pos``, ``__unavailable``):
        ``rows()`` as upserts, and a delete (``d``) for each key whose newest change deletes it
        or a tombstone follows. Runs ``newest_per_key`` as ``rows()`` does."""
        op = F.when(is_live(), F.lit(OP_UPSERT)).otherwise(F.lit(OP_DELETE)).alias(OP)
        return self._winners().select(*(c.name for c in self.schema.columns), op, POS, UNAVAILABLE)

    def _winners(self) -> DataFrame:
        """The changes, picked per primary key unless the survey found no key repeated."""
        repeated = (self.found or ANYTHING).repeated
        return newest_per_key(self.changes, self.schema) if repeated else self.changes

    def lacks_values(self) -> bool:
        """Whether a live image the compaction kept lacks a column Debezium could not read
        (unchanged TOAST): its value is in an older record, which compaction dropped (a Spark
        job; an image of a key kept in several partitions counts even if not the newest)."""
        return bool(self.changes.where(is_live() & (F.size(UNAVAILABLE) > 0)).limit(1).count())


def write_bounds(
    rows_at_most: int, live: int | None = None, live_bytes: int | None = None
) -> WriteBounds:
    """``Sink.replace``'s bounds on a frame of at most ``rows_at_most`` rows, or ``live``."""
    rows = rows_at_most if live is None else min(rows_at_most, live)
    return {"rows_at_most": rows, "bytes_at_most": live_bytes}


def is_live() -> Column:
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


class Survey(NamedTuple):
    """What ``survey`` found in ``decoded_latest`` output: a record that may be a truncate, one
    that may not decode, a keyed live image that may lack an unchanged TOAST value
    (``Rebuild.lacks_values`` then says for sure); ``live``: at least the rebuilt table's rows,
    ``live_bytes`` about their columns' Arrow bytes (``arrow_bytes``; None: not counted);
    ``repeated``: a primary key may have changes in several rows (False: as many keys as
    changes, so the rebuilt table needs no ``newest_per_key``)."""

    candidates: bool
    rejected: bool
    lacking: bool
    live: int | None = None
    live_bytes: int | None = None
    repeated: bool = True
    keys: int | None = None
    """How many primary keys have changes (at least the rebuilt table's rows and deletes)."""


ANYTHING = Survey(candidates=True, rejected=True, lacking=True)
"""No survey: look for everything."""


def survey(decoded: DataFrame, schema: TopicSchema | None = None) -> Survey:
    """``Survey`` of ``decoded_latest`` output (one Spark query); ``live_bytes`` and
    ``repeated`` with ``schema`` (its columns, primary key). ``task_survey`` reads the same
    from the tasks that decode a rebuild's survivors."""
    lacking = ~F.col(CANDIDATE) & is_live() & (F.size(UNAVAILABLE) > 0)
    found = [F.bool_or(CANDIDATE), F.bool_or(F.col(ERROR).isNotNull()), F.bool_or(lacking)]
    keyed_good = ~F.col(CANDIDATE) & F.col(ERROR).isNull()
    live = keyed_good & is_live()
    found.append(F.count(F.when(live, True)))
    size = arrow_bytes(decoded.schema, [*(c.name for c in schema.columns), POS]) if schema else None
    found.append(F.sum(F.when(live, size)) if size is not None else F.lit(None))
    if schema is not None:  # the changes ``Rebuild.rows`` picks from
        found += key_counts(schema, keyed_good & (F.col(OP) != OP_TRUNCATE))
    row: Any = decoded.agg(*found).first() or [False, False, False, 0, None, 0, 0]
    repeated, keys = True, None
    if schema is not None:  # (as many keys as changes: none repeated)
        repeated, keys = row[6] < row[5], row[6]
    held = None if size is None else int(row[4] or 0)
    return Survey(bool(row[0]), bool(row[1]), bool(row[2]), int(row[3]), held, repeated, keys)


# Bytes of a fixed-width value as Arrow, where not 8 (a boolean's is a bit: a byte is near).
_ARROW_WIDTHS: dict[type, int] = {T.BooleanType: 1, T.ByteType: 1, T.ShortType: 2,
    T.IntegerType: 4, T.FloatType: 4, T.DateType: 4, T.DecimalType: 16}  # fmt: skip
VARIABLE = -1
"""``arrow_widths`` of a string or binary column: its bytes and a 4-byte offset."""


def arrow_widths(schema: T.StructType, names: Sequence[str]) -> list[int] | None:
    """The Arrow width of each of the ``names`` columns of ``schema`` (``VARIABLE`` for a
    string's or binary's, a decimal's 16); None if one is nested."""
    widths = []
    for kind in (schema[n].dataType for n in names):
        if isinstance(kind, T.ArrayType | T.MapType | T.StructType):
            return None
        variable = isinstance(kind, T.StringType | T.BinaryType)
        widths.append(VARIABLE if variable else _ARROW_WIDTHS.get(type(kind), 8))
    return widths


def arrow_bytes(schema: T.StructType, names: Sequence[str]) -> Column | None:
    """About how many bytes a row's ``names`` columns of ``schema`` take as Arrow
    (``arrow_widths``); None for a nested column."""
    widths = arrow_widths(schema, names)
    if widths is None:
        return None
    size: Column = F.lit(sum(w for w in widths if w != VARIABLE))
    for name, width in zip(names, widths, strict=True):
        if width == VARIABLE:
            size = size + F.coalesce(F.octet_length(named_column(name)), F.lit(0)) + 4
    return size


def rebuild_table(decoded: DataFrame, schema: TopicSchema, found: Survey = ANYTHING) -> Rebuild:
    """The final image of every live key from ``decoded_latest`` output (see the module doc);
    with ``found`` (``survey``), no truncate or bad-record plan where there is none to find."""
    keyed = decoded.where(~F.col(CANDIDATE)).drop(CANDIDATE)
    if found.candidates:
        unkeyed_all = decoded.where(F.col(CANDIDATE)).drop(CANDIDATE, TOMBSTONED)
        unkeyed = unkeyed_all.where(F.col(ERROR).isNotNull() | (F.col(OP) != OP_TRUNCATE))
        unkeyed = unkeyed.withColumn(
            ERROR, F.coalesce(F.col(ERROR), F.lit("a change without a record key"))
        )
        truncates = truncate_offsets(Decoded(unkeyed_all, schema).good)
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
    if not found.rejected:  # an empty relation: the bad-record check then runs no job
        bad = bad.limit(0)
    if found.candidates:
        changes = after_truncates(changes, truncates)
        bad = Decoded(unkeyed, schema).bad.unionByName(bad)
    else:
        # No truncates, planned on the JVM (createDataFrame of an empty list costs 0.35 s cold).
        truncates = decoded.limit(0).select(
            F.col(TOPIC).alias("topic"), F.col(PARTITION).alias("partition"),
            F.lit(None).cast(T.LongType()).alias(TRUNCATE_OFFSET),
            F.lit(None).cast(T.StringType()).alias(TRUNCATE_POS),
        )  # fmt: skip
    return Rebuild(changes, truncates, bad, schema, found)
