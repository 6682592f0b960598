"""Point-in-time cuts of decoded changes by source position, never splitting a transaction.

Inclusive: an event is kept when its position is at or before the cut.

* ``lsn:<LSN>`` (PostgreSQL): the event's own LSN (``source.lsn``, else the second element of
  ``source.sequence``) <= the cut;
* ``binlog:<file>:<pos>`` (MySQL/MariaDB): ``(binlog file number, pos)`` <= the cut's;
* ``txn:<processor>:<seq>`` (this product's changelog): ``source.commit_seq`` <= ``seq``.

A source transaction (``__txn``: ``transaction.id``, else PostgreSQL ``txId``, else MySQL
``gtid``) is kept only when every one of its events in the decoded range is at or before the
cut; events without a transaction id are judged one by one. An event of another connector, or
without the position fields, fails the job: a cut must not silently keep or drop it.
"""

from __future__ import annotations

from cdc.events.positions import binlog_number as python_binlog_number
from replay.bounds import Bound, BoundKind
from replay.decode import SOURCE, TXN
from replay.decode_position import binlog_number, pg_current_lsn
from replay.spark import Column, DataFrame, F

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


def cut_at(decoded: DataFrame, bound: Bound) -> DataFrame:
    """The decoded changes at or before ``bound`` (see the module doc)."""
    applies, before = _at_or_before(bound)
    reason = (
        f"a {bound.kind.value} cut cannot place an event of this connector or without "
        "its position fields"
    )
    checked = F.when(~applies | before.isNull(), F.raise_error(F.lit(reason))).otherwise(before)
    judged = decoded.withColumn(_AFTER_CUT, ~checked)
    over = (
        judged.where(F.col(TXN).isNotNull())
        .groupBy(TXN)
        .agg(F.bool_or(_AFTER_CUT).alias("__txn_after_cut"))
    )
    kept = judged.join(over, TXN, "left").where(
        ~F.col(_AFTER_CUT) & ~F.coalesce(F.col("__txn_after_cut"), F.lit(False))
    )
    return kept.select(*decoded.columns)
