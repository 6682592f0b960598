"""A Delta table whose source table changed shape: the batch applied and the new columns in one
overwrite commit (with the write's ledger entry and txn id, like any other write).

A MERGE cannot retype or drop a column, nor fill an added column's existing rows with the
column's default, so a batch whose columns differ from the table's is applied in Spark (the
same newer-wins rules as the MERGE, ``merge_rules``) over the table's rows brought to the new
columns: kept columns cast (widened) to their new type, added ones filled with
``TableSpec.defaults`` or NULL, dropped ones gone. The table is rewritten once per schema change.
"""

from __future__ import annotations

from collections.abc import Sequence

from replay.sinks import merge_rules as rules
from replay.sinks.ledger import UncastableValuesError
from replay.sinks.protocol import POS, TableSpec
from replay.spark import Column, DataFrame, F, T, named_column

_IN_TABLE, _IN_BATCH = "__in_table", "__in_batch"


def evolved_rows(
    spec: TableSpec, current: DataFrame, batch: DataFrame, columns: Sequence[tuple[str, T.DataType]]
) -> DataFrame:
    """``current`` (the table's rows, with ``__pos``) brought to ``columns`` with the applicable
    ``batch`` changes applied: the table's new contents, with ``__pos``."""
    kept = set(current.columns)
    brought = []
    for name, kind in columns:
        if name in kept:
            value = named_column(name).cast(kind)  # check_casts first: all values cast
        elif name in spec.defaults:
            value = F.lit(spec.defaults[name]).cast(kind)
        else:
            value = F.lit(None).cast(kind)
        brought.append(value.alias(name))
    table = current.select(*brought, named_column(POS), F.lit(True).alias(_IN_TABLE)).alias("t")
    changes = batch.withColumn(_IN_BATCH, F.lit(True)).alias("s")
    on = [F.col(f"t.`{k}`") == F.col(f"s.`{k}`") for k in spec.primary_key]
    joined = table.join(changes, on, "full_outer")
    in_table = F.coalesce(F.col(f"t.{_IN_TABLE}"), F.lit(False))
    in_batch = F.coalesce(F.col(f"s.{_IN_BATCH}"), F.lit(False))
    deletes = F.coalesce(F.expr(rules.DELETE_WHEN), F.lit(False))
    updates = F.coalesce(F.expr(rules.UPDATE_WHEN), F.lit(False))
    inserts = F.coalesce(F.expr(rules.INSERT_WHEN), F.lit(False))
    take_batch = in_batch & ((in_table & updates) | (~in_table & inserts))
    keep_table = in_table & (~in_batch | (~deletes & ~updates))
    names = [name for name, _ in columns] + [POS]
    picked = (F.when(take_batch, F.col(f"s.`{n}`")).otherwise(F.col(f"t.`{n}`")) for n in names)
    return joined.where(take_batch | keep_table).select(
        *(value.alias(n) for value, n in zip(picked, names, strict=True))
    )


def check_casts(
    spec: TableSpec, current: DataFrame, columns: Sequence[tuple[str, T.DataType]]
) -> None:
    """Raise ``UncastableValuesError`` when a kept column's stored values do not all cast to
    its new type (one aggregation, only over the retyped columns)."""
    old = {f.name: f.dataType for f in current.schema.fields}
    retyped = [(n, k) for n, k in columns if n in old and old[n] != k]
    if not retyped:
        return
    counts = current.select(
        *(F.count(F.when(uncastable(n, k), 1)).alias(n) for n, k in retyped)
    ).first()
    for name, kind in retyped:
        if counts is not None and counts[name]:
            raise UncastableValuesError(
                spec.name, name, old[name].simpleString(), kind.simpleString()
            )


def uncastable(name: str, kind: T.DataType) -> Column:
    """True where column ``name`` holds a value that does not cast to ``kind``."""
    value = named_column(name)
    return value.isNotNull() & value.try_cast(kind).isNull()
