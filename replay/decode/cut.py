"""Point-in-time cuts of decoded changes by source position, never splitting a transaction.

Inclusive: an event is kept when its position is at or before the cut.

* ``lsn:<LSN>`` (PostgreSQL): the event's own LSN (``source.lsn``, else the second element of
  ``source.sequence``) <= the cut;
* ``binlog:<file>:<pos>`` (MySQL/MariaDB): ``(binlog file number, pos)`` <= the cut's;
* ``txn:<processor>:<seq>`` (this product's changelog): ``source.commit_seq`` <= ``seq``.

A source transaction (``__txn``: ``transaction.id``, else PostgreSQL ``txId``, else MySQL
``gtid``) is kept only when every one of its events in the decoded range is at or before the
cut; events without a transaction id are judged one by one. A transaction over several tables
has events in several topics: the ``straddling`` transactions of the ``judged_transactions`` of
every topic, passed to each topic's ``cut_at``, keep it whole in all of them. An event of
another connector, or without the position fields, fails the job: a cut must not silently keep
or drop it.

With ``pg_current_wal_lsn()`` (where the next WAL record will be written, maybe the first
change of the next transaction) as the cut, a transaction of one change written right there
would be kept: cut at that LSN minus one for "everything committed before".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from cdc.events.positions import binlog_number as python_binlog_number
from replay.decode.changes import SOURCE, TXN, decode_native
from replay.decode.position import binlog_number, pg_current_lsn
from replay.decode.schema import SOURCE_TYPE, TopicSchema
from replay.reading.bounds import Bound, BoundKind
from replay.reading.plan import ReplayPlan
from replay.reading.sources import read_records
from replay.spark import Column, DataFrame, F, SparkSession, T

_AFTER_CUT = "__after_cut"


def _at_or_before(bound: Bound) -> tuple[Column, Column]:
    """(applies: the event's connector fits the bound, at or before the cut)."""
    source = F.col(SOURCE)
    connector = source["connector"]
    if bound.kind is BoundKind.LSN and bound.lsn is not None:
        return connector == "postgresql", pg_current_lsn(source) <= F.lit(bound.lsn)
    if bound.kind is BoundKind.BINLOG and bound.binlog is not None:
        file, pos = bound.binlog
        number, cut = binlog_number(source["file"]), F.lit(python_binlog_number(file))
        before = (number < cut) | ((number == cut) & (source["pos"] <= F.lit(pos)))
        return connector.isin("mysql", "mariadb"), before
    if bound.kind is BoundKind.TXN and bound.txn is not None:
        processor, _, seq = bound.txn.rpartition(":")
        if not processor or not seq.isdigit():
            raise ValueError(f"txn bound {bound.txn!r} is not <processor>:<commit sequence>")
        applies = (connector == "replicator") & (source["processor_id"] == F.lit(processor))
        return applies, source["commit_seq"] <= F.lit(int(seq))
    raise ValueError(f"{bound.kind.value} is not a source-position bound")


def _judged(decoded: DataFrame, bound: Bound) -> DataFrame:
    """``decoded`` plus ``__after_cut`` (the job fails on an event the cut cannot place)."""
    applies, before = _at_or_before(bound)
    reason = (
        f"a {bound.kind.value} cut cannot place an event of this connector or without "
        "its position fields"
    )
    checked = F.when(~applies | before.isNull(), F.raise_error(F.lit(reason))).otherwise(before)
    return decoded.withColumn(_AFTER_CUT, ~checked)


def judged_transactions(decoded: DataFrame, bound: Bound) -> DataFrame:
    """Per ``__txn`` of ``decoded``: whether it has events ``after`` the cut and ``before`` it
    (at or before); the rows of several topics go to ``straddling`` together."""
    return (
        _judged(decoded, bound)
        .where(F.col(TXN).isNotNull())
        .groupBy(TXN)
        .agg(F.bool_or(_AFTER_CUT).alias("after"), F.bool_or(~F.col(_AFTER_CUT)).alias("before"))
    )


def straddling(judged: DataFrame) -> DataFrame:
    """The ``__txn`` of the transactions with events on both sides of the cut, from the
    ``judged_transactions`` rows of one or more topics."""
    both = F.bool_or("after") & F.bool_or("before")
    return judged.groupBy(TXN).agg(both.alias("both")).where(F.col("both")).select(TXN)


def cut_at(decoded: DataFrame, bound: Bound, straddling: Sequence[str] = ()) -> DataFrame:
    """The decoded changes at or before ``bound`` (see the module doc), without the
    transactions ``straddling`` names (known to go on past the cut in other topics)."""
    judged = _judged(decoded, bound)
    over = (
        judged.where(F.col(TXN).isNotNull())
        .groupBy(TXN)
        .agg(F.bool_or(_AFTER_CUT).alias("__txn_after_cut"))
    )
    kept = judged.join(over, TXN, "left").where(
        ~F.col(_AFTER_CUT) & ~F.coalesce(F.col("__txn_after_cut"), F.lit(False))
    )
    if straddling:
        kept = kept.where(~F.coalesce(F.col(TXN).isin(*straddling), F.lit(False)))
    return kept.select(*decoded.columns)


def records_at_or_before(records: DataFrame, bound: Bound) -> DataFrame:
    """The raw records (RAW_SCHEMA) of events at or before the cut, judged by their ``source``
    alone (for what only needs the records up to the cut, e.g. the schema versions; records
    the cut cannot place are left out here and fail the decoding job itself)."""
    source = T.StructType([T.StructField("source", SOURCE_TYPE)])
    layouts = T.StructType([T.StructField("payload", source), T.StructField("source", SOURCE_TYPE)])
    parsed = F.from_json(F.col("value").cast("string"), layouts)
    applies, before = _at_or_before(bound)
    found = records.withColumn(SOURCE, F.coalesce(parsed["payload"]["source"], parsed["source"]))
    return found.where(applies & before).drop(SOURCE)


def straddling_transactions(
    spark: SparkSession, stream_url: str, plans: Mapping[str, ReplayPlan], stop: Bound,
    schema_of: Callable[[str], TopicSchema],
) -> tuple[str, ...]:  # fmt: skip
    """With a source-position ``stop`` over several topics: the transactions some topic has
    events of after the cut and some (maybe another) at or before it; every topic leaves them
    out, so a cut never splits a transaction over several tables of a job."""
    if not stop.is_source_position or len(plans) < 2:
        return ()
    judged = None
    for topic, plan in plans.items():
        if plan.span == 0:
            continue
        decoded = decode_native(read_records(spark, stream_url, plan), schema_of(topic), ())
        topic_judged = judged_transactions(decoded.good, stop)
        judged = topic_judged if judged is None else judged.unionByName(topic_judged)
    if judged is None:
        return ()
    return tuple(r[TXN] for r in straddling(judged).collect())
